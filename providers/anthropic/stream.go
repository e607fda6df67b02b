package anthropic

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// maxBlockIndex bounds the content-block index a stream may use, so a
// corrupt index cannot make the decoder allocate without limit.
const maxBlockIndex = 1 << 16

type blockKind uint8

const (
	kindOther blockKind = iota // server tool blocks, unknown types
	kindText
	kindThinking
	kindRedacted
	kindTool
)

// streamBlock is the state of one content block, by content index.
type streamBlock struct {
	kind  blockKind
	open  bool
	tool  int    // kindTool: position among tool_use blocks
	args  bool   // kindTool: argument bytes were streamed
	input string // kindTool: a non-empty input sent in content_block_start
	text  []byte // kindThinking: the block's thinking text
	sig   string
	data  string
}

// decoder decodes one streamed Messages answer.
type decoder struct {
	b        llm.ResultBuilder
	blocks   []streamBlock
	tools    int
	usage    llm.Usage
	complete bool
	stopSeq  string // message_delta's stop_sequence
}

// Complete reports whether message_stop arrived.
func (d *decoder) Complete() bool { return d.complete }

// Result is everything accumulated so far.
func (d *decoder) Result() *llm.ChatResult {
	r := d.b.Result()
	r.StopSequence = d.stopSeq
	return r
}

func decodeErr(what string, err error) error {
	return &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("%s: %w", what, err)}
}

// send folds ev into the result and hands it to the stream.
func (d *decoder) send(emit wire.Emit, ev llm.Event) error {
	d.b.Apply(&ev)
	if !emit(ev) {
		return wire.ErrAborted
	}
	return nil
}

// Feed decodes one SSE event. It dispatches on the JSON "type"; the event
// name is not needed (rebuilt recordings may lack it).
func (d *decoder) Feed(_, data []byte, emit wire.Emit) (bool, error) {
	if text, ok := textDelta(data); ok {
		if text == "" {
			return false, nil
		}
		return false, d.send(emit, llm.Event{Type: llm.EventText, Text: text})
	}
	if jsonscan.IsNull(data) {
		return false, nil
	}
	var typ, index, delta, cb, msg, usage, errv, reqID []byte
	o := jsonscan.NewObject(data)
	for o.Next() {
		switch string(o.Key()) {
		case "type":
			typ = o.Value()
		case "index":
			index = o.Value()
		case "delta":
			delta = o.Value()
		case "content_block":
			cb = o.Value()
		case "message":
			msg = o.Value()
		case "usage":
			usage = o.Value()
		case "error":
			errv = o.Value()
		case "request_id":
			reqID = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return false, decodeErr("stream event", err)
	}
	t, _ := jsonscan.RawString(typ)
	switch string(t) {
	case "content_block_delta":
		return false, d.blockDelta(index, delta, emit)
	case "content_block_start":
		return false, d.blockStart(index, cb, emit)
	case "content_block_stop":
		return false, d.blockStop(index, emit)
	case "message_start":
		return false, d.messageStart(msg)
	case "message_delta":
		return false, d.messageDelta(delta, usage, emit)
	case "message_stop":
		d.flushThinking()
		d.complete = true
		return true, nil
	case "error":
		return false, streamError(errv, reqID)
	}
	return false, nil // ping and event types this decoder does not use
}

// Text deltas are almost every event of a stream, and Anthropic writes them
// in one fixed shape (padding aside). textDelta recognises that exact shape
// and decodes it with a single pass over the text; anything else, including
// the same event with its keys in another order, goes through the general
// walk in Feed.
const (
	textDeltaHead = `{"type":"content_block_delta","index":`
	textDeltaMid  = `,"delta":{"type":"text_delta","text":`
)

func textDelta(data []byte) (string, bool) {
	if !bytes.HasPrefix(data, []byte(textDeltaHead)) {
		return "", false
	}
	i := len(textDeltaHead)
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	if j == i || !bytes.HasPrefix(data[j:], []byte(textDeltaMid)) {
		return "", false
	}
	start := j + len(textDeltaMid)
	if start >= len(data) || data[start] != '"' {
		return "", false
	}
	end := start + 1
	for {
		k := bytes.IndexByte(data[end:], '"')
		if k < 0 {
			return "", false
		}
		end += k
		bs := 0
		for b := end - 1; b > start && data[b] == '\\'; b-- {
			bs++
		}
		end++
		if bs%2 == 0 {
			break
		}
	}
	// What follows the string must close both objects, padding allowed.
	rest := data[end:]
	closes := 0
	for _, c := range rest {
		switch c {
		case '}':
			closes++
		case ' ', '\t', '\r', '\n':
		default:
			return "", false
		}
	}
	if closes != 2 {
		return "", false
	}
	text, err := jsonscan.String(data[start:end])
	if err != nil {
		return "", false
	}
	return text, true
}

// errNoIndex: a content_block_start, content_block_delta or
// content_block_stop event without its index names no block. It is
// malformed, never taken for block 0.
var errNoIndex = errors.New("missing")

// block returns the state of content block index, growing the table.
func (d *decoder) block(index []byte) (*streamBlock, error) {
	if len(index) == 0 || jsonscan.IsNull(index) {
		return nil, decodeErr("content block index", errNoIndex)
	}
	i, err := jsonscan.Int(index)
	if err != nil {
		return nil, decodeErr("content block index", err)
	}
	if i < 0 || i > maxBlockIndex {
		return nil, decodeErr("content block index", fmt.Errorf("%d out of range", i))
	}
	for len(d.blocks) <= i {
		d.blocks = append(d.blocks, streamBlock{})
	}
	return &d.blocks[i], nil
}

func (d *decoder) blockStart(index, cb []byte, emit wire.Emit) error {
	blk, err := d.block(index)
	if err != nil {
		return err
	}
	var typ, id, name, input, text, thinking, sig, data []byte
	o := jsonscan.NewObject(cb)
	for o.Next() {
		switch string(o.Key()) {
		case "type":
			typ = o.Value()
		case "id":
			id = o.Value()
		case "name":
			name = o.Value()
		case "input":
			input = o.Value()
		case "text":
			text = o.Value()
		case "thinking":
			thinking = o.Value()
		case "signature":
			sig = o.Value()
		case "data":
			data = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("content_block_start", err)
	}
	if blk.open {
		// A second start of an open block would orphan it (a tool call
		// whose arguments never close).
		return decodeErr("content_block_start", fmt.Errorf("block %s started twice", bytes.TrimSpace(index)))
	}
	*blk = streamBlock{open: true, text: blk.text[:0]}
	t, _ := jsonscan.RawString(typ)
	switch string(t) {
	case "text":
		blk.kind = kindText
		s, err := jsonscan.String(text)
		if err != nil {
			return decodeErr("content_block_start text", err)
		}
		if s != "" {
			return d.send(emit, llm.Event{Type: llm.EventText, Text: s})
		}
	case "thinking":
		blk.kind = kindThinking
		s, err := jsonscan.String(thinking)
		if err != nil {
			return decodeErr("content_block_start thinking", err)
		}
		if blk.sig, err = jsonscan.String(sig); err != nil {
			return decodeErr("content_block_start signature", err)
		}
		if s != "" {
			blk.text = append(blk.text, s...)
			return d.send(emit, llm.Event{Type: llm.EventReasoning, Text: s})
		}
	case "redacted_thinking":
		blk.kind = kindRedacted
		if blk.data, err = jsonscan.String(data); err != nil {
			return decodeErr("content_block_start data", err)
		}
	case "tool_use":
		// A call without its id or name is malformed: a typed error, and
		// no slot in the result's tool calls (checked before the block
		// becomes a call).
		sid, err1 := jsonscan.String(id)
		sname, err2 := jsonscan.String(name)
		if err1 != nil || err2 != nil || sid == "" || sname == "" {
			return decodeErr("content_block_start tool_use", fmt.Errorf("id or name: %w", jsonscan.ErrSyntax))
		}
		blk.kind = kindTool
		blk.tool = d.tools
		d.tools++
		in := jsonscan.NewObject(input)
		if in.Next() { // an input that is not {}: kept in case no delta follows
			blk.input = string(input)
		} else if in.Err() != nil {
			return decodeErr("content_block_start input", in.Err())
		}
		return d.send(emit, llm.Event{Type: llm.EventToolCallStart, ToolIndex: blk.tool, ToolCallID: sid, ToolName: sname})
	}
	return nil
}

func (d *decoder) blockDelta(index, delta []byte, emit wire.Emit) error {
	blk, err := d.block(index)
	if err != nil {
		return err
	}
	var typ, text, partial, sig []byte
	o := jsonscan.NewObject(delta)
	for o.Next() {
		switch string(o.Key()) {
		case "type":
			typ = o.Value()
		case "text", "thinking":
			text = o.Value()
		case "partial_json":
			partial = o.Value()
		case "signature":
			sig = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("content_block_delta", err)
	}
	t, _ := jsonscan.RawString(typ)
	switch string(t) {
	case "text_delta":
		s, err := jsonscan.String(text)
		if err != nil {
			return decodeErr("text_delta", err)
		}
		if s == "" {
			return nil
		}
		return d.send(emit, llm.Event{Type: llm.EventText, Text: s})
	case "thinking_delta":
		s, err := jsonscan.String(text)
		if err != nil {
			return decodeErr("thinking_delta", err)
		}
		if s == "" {
			return nil
		}
		blk.text = append(blk.text, s...)
		return d.send(emit, llm.Event{Type: llm.EventReasoning, Text: s})
	case "signature_delta":
		s, err := jsonscan.String(sig)
		if err != nil {
			return decodeErr("signature_delta", err)
		}
		blk.sig += s
		if s != "" && blk.kind == kindThinking {
			// Once per block, on the event kind reasoning already uses: no
			// field is added to every event (see llm.Event.Signature).
			return d.send(emit, llm.Event{Type: llm.EventReasoning, Signature: s})
		}
	case "input_json_delta":
		if blk.kind != kindTool { // server_tool_use input: not a client call
			return nil
		}
		s, err := jsonscan.String(partial)
		if err != nil {
			return decodeErr("input_json_delta", err)
		}
		if s == "" {
			return nil
		}
		blk.args = true
		return d.send(emit, llm.Event{Type: llm.EventToolCallDelta, ToolIndex: blk.tool, Text: s})
	}
	return nil
}

func (d *decoder) blockStop(index []byte, emit wire.Emit) error {
	blk, err := d.block(index)
	if err != nil {
		return err
	}
	if !blk.open {
		return nil
	}
	blk.open = false
	switch blk.kind {
	case kindThinking, kindRedacted:
		d.addThinking(blk)
	case kindTool:
		if !blk.args {
			args := blk.input
			if args == "" {
				args = "{}"
			}
			blk.args = true
			return d.send(emit, llm.Event{Type: llm.EventToolCallDelta, ToolIndex: blk.tool, Text: args})
		}
	}
	return nil
}

func (d *decoder) addThinking(blk *streamBlock) {
	if blk.kind == kindRedacted {
		d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Redacted: true, Data: blk.data})
		return
	}
	d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Text: string(blk.text), Signature: blk.sig})
}

// flushThinking completes thinking blocks whose stop event never came.
func (d *decoder) flushThinking() {
	for i := range d.blocks {
		blk := &d.blocks[i]
		if blk.open && (blk.kind == kindThinking || blk.kind == kindRedacted) {
			blk.open = false
			d.addThinking(blk)
		}
	}
}

func (d *decoder) messageStart(msg []byte) error {
	var id, model, usage []byte
	o := jsonscan.NewObject(msg)
	for o.Next() {
		switch string(o.Key()) {
		case "id":
			id = o.Value()
		case "model":
			model = o.Value()
		case "usage":
			usage = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("message_start", err)
	}
	sid, err1 := jsonscan.String(id)
	smodel, err2 := jsonscan.String(model)
	if err1 != nil || err2 != nil {
		return decodeErr("message_start", fmt.Errorf("id or model: %w", jsonscan.ErrSyntax))
	}
	d.b.SetMeta(sid, smodel)
	if usage != nil {
		if err := d.mergeUsage(usage); err != nil {
			return err
		}
		// Folded into the result without an event: an error event right
		// after message_start must still find the stream unstarted.
		u := d.usage
		d.b.Apply(&llm.Event{Type: llm.EventUsage, Usage: &u})
	}
	return nil
}

func (d *decoder) messageDelta(delta, usage []byte, emit wire.Emit) error {
	stop := jsonscan.Get(delta, "stop_reason")
	if usage != nil {
		if err := d.mergeUsage(usage); err != nil {
			return err
		}
		u := d.usage
		if err := d.send(emit, llm.Event{Type: llm.EventUsage, Usage: &u}); err != nil {
			return err
		}
	}
	if seq := jsonscan.Get(delta, "stop_sequence"); seq != nil && !jsonscan.IsNull(seq) {
		if s, err := jsonscan.String(seq); err == nil {
			d.stopSeq = s
		}
	}
	if !jsonscan.IsNull(stop) {
		raw, ok := jsonscan.RawString(stop)
		if !ok {
			return decodeErr("message_delta stop_reason", jsonscan.ErrSyntax)
		}
		r := wire.FinishFor(finishReason(string(raw)), d.tools)
		return d.send(emit, llm.Event{Type: llm.EventFinish, Finish: r})
	}
	return nil
}

// mergeUsage folds a cumulative Anthropic usage object into d.usage: fields
// present with a non-zero value overwrite.
func (d *decoder) mergeUsage(usage []byte) error {
	o := jsonscan.NewObject(usage)
	for o.Next() {
		var dst *int
		switch string(o.Key()) {
		case "input_tokens":
			dst = &d.usage.PromptTokens
		case "output_tokens":
			dst = &d.usage.CompletionTokens
		case "cache_read_input_tokens":
			dst = &d.usage.CacheReadTokens
		case "cache_creation_input_tokens":
			dst = &d.usage.CacheWriteTokens
		default:
			continue
		}
		n, err := jsonscan.Int(o.Value())
		if err != nil {
			return decodeErr("usage", err)
		}
		if n != 0 {
			*dst = n
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("usage", err)
	}
	return nil
}

// streamError turns an in-stream error event into an *llm.APIError.
func streamError(errv, reqID []byte) error {
	var typ, msg []byte
	o := jsonscan.NewObject(errv)
	for o.Next() {
		switch string(o.Key()) {
		case "type":
			typ = o.Value()
		case "message":
			msg = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("error event", err)
	}
	st, _ := jsonscan.String(typ)
	sm, _ := jsonscan.String(msg)
	sr, _ := jsonscan.String(reqID)
	return apiError(st, sm, sr)
}
