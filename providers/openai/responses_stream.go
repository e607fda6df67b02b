package openai

import (
	"encoding/json"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// NewStreamDecoder returns a decoder for one streamed Responses answer.
func (ResponsesCodec) NewStreamDecoder() wire.StreamDecoder { return &responsesDecoder{} }

// Output item kinds the decoder tracks.
const (
	itemOther uint8 = iota
	itemReasoning
	itemMessage
	itemFunctionCall
)

// responsesItem is the decoder's state for one output item, by output_index.
type responsesItem struct {
	kind uint8
	id   string
	// pos is a function call's position in ChatResult.ToolCalls.
	pos int
	// textSeen and refusalSeen record that deltas arrived for a message.
	textSeen, refusalSeen bool
}

// responsesDecoder walks each event with jsonscan, dispatching on the JSON
// "type" (the SSE event name when there is none). It is not safe for
// concurrent use.
type responsesDecoder struct {
	b llm.ResultBuilder

	complete bool

	items []responsesItem
	// argsSeen[pos] records whether call pos received argument text.
	argsSeen []bool

	// pending is a completed reasoning block waiting for the item that
	// follows it, which its Signature records.
	pending *llm.ThinkingBlock

	// reasoning separators: the (output_index, part) of the last reasoning
	// delta, and whether any reasoning was emitted.
	lastReasonOut, lastReasonPart int
	reasoned                      bool

	// content records that the stream carried any output event, so that a
	// terminal response with output but no deltas is replayed from it.
	content bool

	haveID, haveModel bool
}

func (d *responsesDecoder) Complete() bool { return d.complete }

// Result is everything accumulated so far, a reasoning block still waiting
// for its follower included.
func (d *responsesDecoder) Result() *llm.ChatResult {
	r := d.b.Result()
	if d.pending != nil {
		r.ThinkingBlocks = append(r.ThinkingBlocks, *d.pending)
	}
	return r
}

func (d *responsesDecoder) send(emit wire.Emit, ev llm.Event) error {
	d.b.Apply(&ev)
	if !emit(ev) {
		return wire.ErrAborted
	}
	return nil
}

// responsesEvent holds the raw members of one event that the decoder reads.
type responsesEvent struct {
	typ                      []byte
	delta, itemID, arguments []byte
	item, response, errv     []byte
	code, message            []byte
	outputIndex, partIndex   int
	hasOutput                bool
}

// Feed decodes one Responses stream event.
func (d *responsesDecoder) Feed(name, data []byte, emit wire.Emit) (bool, error) {
	data = trimSpace(data)
	if len(data) == 0 {
		return false, nil
	}
	if data[0] != '{' {
		if string(data) == "[DONE]" {
			// Some gateways end the stream as Chat Completions does; it
			// is not a completion signal (premature without one).
			return true, nil
		}
		return false, decodeErr("event", errNotObject)
	}
	var ev responsesEvent
	o := jsonscan.NewObject(data)
	for o.Next() {
		v := o.Value()
		switch string(o.Key()) {
		case "type":
			ev.typ, _ = jsonscan.RawString(v)
		case "delta":
			ev.delta = v
		case "item_id":
			ev.itemID, _ = jsonscan.RawString(v)
		case "output_index":
			n, err := jsonscan.Int(v)
			if err != nil {
				return false, decodeErr("output_index", err)
			}
			ev.outputIndex, ev.hasOutput = n, true
		case "summary_index", "content_index":
			n, err := jsonscan.Int(v)
			if err != nil {
				return false, decodeErr("part index", err)
			}
			ev.partIndex = n
		case "arguments":
			ev.arguments = v
		case "item":
			ev.item = v
		case "response":
			ev.response = v
		case "error":
			ev.errv = v
		case "code":
			ev.code = v
		case "message":
			ev.message = v
		}
	}
	if err := o.Err(); err != nil {
		return false, decodeErr("event", err)
	}
	typ := ev.typ
	if len(typ) == 0 {
		typ = name
	}
	switch string(typ) {
	case "response.output_text.delta":
		return false, d.textDelta(&ev, llm.EventText, emit)
	case "response.refusal.delta":
		return false, d.textDelta(&ev, llm.EventRefusal, emit)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return false, d.reasoningDelta(&ev, emit)
	case "response.function_call_arguments.delta":
		return false, d.argumentsDelta(&ev, ev.delta, emit)
	case "response.function_call_arguments.done":
		if it := d.lookup(&ev); it != nil && it.kind == itemFunctionCall && !d.argsSeen[it.pos] {
			return false, d.argumentsDelta(&ev, ev.arguments, emit)
		}
		return false, nil
	case "response.output_item.added":
		return false, d.itemAdded(&ev, emit)
	case "response.output_item.done":
		return false, d.itemDone(&ev, emit)
	case "response.created", "response.in_progress", "response.queued":
		d.meta(ev.response)
		return false, nil
	case "response.completed", "response.incomplete":
		return true, d.finish(ev.response, emit)
	case "response.failed":
		d.meta(ev.response)
		return false, responseFailed(jsonscan.Get(ev.response, "error"))
	case "error":
		return false, d.errorEvent(&ev, data)
	}
	return false, nil
}

// lookup finds the item an event is about, by output_index, else by item_id.
func (d *responsesDecoder) lookup(ev *responsesEvent) *responsesItem {
	if ev.hasOutput && ev.outputIndex >= 0 && ev.outputIndex < len(d.items) {
		return &d.items[ev.outputIndex]
	}
	if len(ev.itemID) > 0 {
		for i := range d.items {
			if d.items[i].id == string(ev.itemID) {
				return &d.items[i]
			}
		}
	}
	return nil
}

func (d *responsesDecoder) textDelta(ev *responsesEvent, ty llm.EventType, emit wire.Emit) error {
	s, err := textValue(ev.delta)
	if err != nil {
		return decodeErr("delta", err)
	}
	d.content = true
	if it := d.lookup(ev); it != nil {
		if ty == llm.EventText {
			it.textSeen = true
		} else {
			it.refusalSeen = true
		}
	}
	if s == "" {
		return nil
	}
	return d.send(emit, llm.Event{Type: ty, Text: s})
}

// reasoningDelta emits a reasoning delta, preceded by a blank line when it
// opens a new summary part or reasoning item, as ParseChat joins them.
func (d *responsesDecoder) reasoningDelta(ev *responsesEvent, emit wire.Emit) error {
	s, err := textValue(ev.delta)
	if err != nil {
		return decodeErr("delta", err)
	}
	d.content = true
	if s == "" {
		return nil
	}
	if d.reasoned && (ev.outputIndex != d.lastReasonOut || ev.partIndex != d.lastReasonPart) {
		if err := d.send(emit, llm.Event{Type: llm.EventReasoning, Text: reasoningSep}); err != nil {
			return err
		}
	}
	d.reasoned, d.lastReasonOut, d.lastReasonPart = true, ev.outputIndex, ev.partIndex
	return d.send(emit, llm.Event{Type: llm.EventReasoning, Text: s})
}

func (d *responsesDecoder) argumentsDelta(ev *responsesEvent, v []byte, emit wire.Emit) error {
	it := d.lookup(ev)
	if it == nil || it.kind != itemFunctionCall {
		return nil // arguments of a call never announced: nothing to attach them to
	}
	s, err := argumentsValue(v)
	if err != nil {
		return decodeErr("arguments", err)
	}
	if s == "" {
		return nil
	}
	d.argsSeen[it.pos] = true
	return d.send(emit, llm.Event{Type: llm.EventToolCallDelta, ToolIndex: it.pos, Text: s})
}

// itemFields are the members of an output item the decoder reads.
type itemFields struct {
	typ                             []byte
	id, callID, name, args, content []byte
	summary, encrypted              []byte
}

func readItem(v []byte) (itemFields, error) {
	var f itemFields
	o := jsonscan.NewObject(v)
	for o.Next() {
		val := o.Value()
		switch string(o.Key()) {
		case "type":
			f.typ, _ = jsonscan.RawString(val)
		case "id":
			f.id = val
		case "call_id":
			f.callID = val
		case "name":
			f.name = val
		case "arguments":
			f.args = val
		case "content":
			f.content = val
		case "summary":
			f.summary = val
		case "encrypted_content":
			f.encrypted = val
		}
	}
	return f, o.Err()
}

func (d *responsesDecoder) itemAdded(ev *responsesEvent, emit wire.Emit) error {
	f, err := readItem(ev.item)
	if err != nil {
		return decodeErr("item", err)
	}
	id, err := textValue(f.id)
	if err != nil {
		return decodeErr("item.id", err)
	}
	idx := len(d.items)
	if ev.hasOutput && ev.outputIndex >= 0 && ev.outputIndex < 1<<16 {
		idx = ev.outputIndex
	}
	for len(d.items) <= idx {
		d.items = append(d.items, responsesItem{})
	}
	it := &d.items[idx]
	*it = responsesItem{id: id}
	switch string(f.typ) {
	case "reasoning":
		it.kind = itemReasoning
		d.flushPending("") // reasoning followed by reasoning: no item of its own
		return nil
	case "message":
		it.kind = itemMessage
		d.flushPending(follower(followsMessage, id))
		return nil
	case "function_call":
		it.kind = itemFunctionCall
	default:
		d.flushPending(follower(string(f.typ), id))
		return nil
	}
	d.content = true
	callID, err := textValue(f.callID)
	if err != nil {
		return decodeErr("item.call_id", err)
	}
	name, err := textValue(f.name)
	if err != nil {
		return decodeErr("item.name", err)
	}
	args, err := argumentsValue(f.args)
	if err != nil {
		return decodeErr("item.arguments", err)
	}
	if callID == "" {
		callID = id
	}
	it.pos = len(d.argsSeen)
	if callID == "" {
		callID = syntheticCallID(it.pos)
	}
	d.argsSeen = append(d.argsSeen, args != "")
	d.flushPending(follower(followsFunctionCall, callID))
	return d.send(emit, llm.Event{Type: llm.EventToolCallStart, ToolIndex: it.pos, ToolCallID: callID, ToolName: name, Text: args})
}

// flushPending hands the waiting reasoning block, if any, to the result
// with the item that followed it.
func (d *responsesDecoder) flushPending(next string) {
	if d.pending == nil {
		return
	}
	d.pending.Signature = next
	d.b.AddThinkingBlock(*d.pending)
	d.pending = nil
}

func (d *responsesDecoder) itemDone(ev *responsesEvent, emit wire.Emit) error {
	f, err := readItem(ev.item)
	if err != nil {
		return decodeErr("item", err)
	}
	it := d.lookup(ev)
	switch string(f.typ) {
	case "reasoning":
		d.content = true
		var item responseItem
		if err := json.Unmarshal(ev.item, &item); err != nil {
			return decodeErr("reasoning item", err)
		}
		d.flushPending("")
		d.pending = &llm.ThinkingBlock{
			Format: ResponsesFormat, ID: item.ID.s, Data: item.EncryptedContent.s,
			Text: reasoningText(item.Summary, item.Content),
		}
	case "function_call":
		if it == nil || it.kind != itemFunctionCall || d.argsSeen[it.pos] {
			return nil
		}
		args, err := argumentsValue(f.args)
		if err != nil {
			return decodeErr("item.arguments", err)
		}
		if strings.TrimSpace(args) == "" {
			args = emptyArguments
		}
		d.argsSeen[it.pos] = true
		return d.send(emit, llm.Event{Type: llm.EventToolCallDelta, ToolIndex: it.pos, Text: args})
	case "message":
		// A message whose text never came as deltas (some gateways send
		// the item whole) is emitted from the finished item.
		if it == nil || (it.textSeen && it.refusalSeen) || !isArray(f.content) {
			return nil
		}
		var parts []responsePart
		if err := json.Unmarshal(f.content, &parts); err != nil {
			return decodeErr("message content", err)
		}
		for _, p := range parts {
			switch {
			case (p.Type == "output_text" || p.Type == "text") && !it.textSeen && p.Text.s != "":
				d.content = true
				if err := d.send(emit, llm.Event{Type: llm.EventText, Text: p.Text.s}); err != nil {
					return err
				}
			case p.Type == "refusal" && !it.refusalSeen && p.Refusal.s != "":
				d.content = true
				if err := d.send(emit, llm.Event{Type: llm.EventRefusal, Text: p.Refusal.s}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// meta records the response id and model from a response object.
func (d *responsesDecoder) meta(resp []byte) {
	if d.haveID && d.haveModel || !isObject(resp) {
		return
	}
	o := jsonscan.NewObject(resp)
	for o.Next() {
		switch string(o.Key()) {
		case "id":
			if s, err := jsonscan.String(o.Value()); err == nil && s != "" && !d.haveID {
				d.b.SetMeta(s, "")
				d.haveID = true
			}
		case "model":
			if s, err := jsonscan.String(o.Value()); err == nil && s != "" && !d.haveModel {
				d.b.SetMeta("", s)
				d.haveModel = true
			}
		}
	}
}

// finish handles response.completed and response.incomplete: usage, the
// finish reason and completion.
func (d *responsesDecoder) finish(resp []byte, emit wire.Emit) error {
	d.meta(resp)
	var status, reason string
	var usage, output []byte
	if isObject(resp) {
		o := jsonscan.NewObject(resp)
		for o.Next() {
			switch string(o.Key()) {
			case "status":
				status, _ = textValue(o.Value())
			case "incomplete_details":
				if isObject(o.Value()) {
					reason, _ = textValue(jsonscan.Get(o.Value(), "reason"))
				}
			case "usage":
				usage = o.Value()
			case "output":
				output = o.Value()
			}
		}
		if err := o.Err(); err != nil {
			return decodeErr("response", err)
		}
	}
	if !d.content && isArray(output) && !isEmptyArray(output) {
		if err := d.replayOutput(resp, emit); err != nil {
			return err
		}
	}
	d.flushPending("")
	for pos, seen := range d.argsSeen {
		if !seen {
			d.argsSeen[pos] = true
			if err := d.send(emit, llm.Event{Type: llm.EventToolCallDelta, ToolIndex: pos, Text: emptyArguments}); err != nil {
				return err
			}
		}
	}
	u, ok, err := parseResponsesUsage(usage)
	if err != nil {
		return decodeErr("usage", err)
	}
	if ok {
		up := new(llm.Usage)
		*up = u
		if err := d.send(emit, llm.Event{Type: llm.EventUsage, Usage: up}); err != nil {
			return err
		}
	}
	if status == "" {
		status = "completed"
	}
	d.complete = true
	return d.send(emit, llm.Event{Type: llm.EventFinish, Finish: responsesFinish(status, reason, len(d.argsSeen), d.b.HasRefusal())})
}

// replayOutput emits a terminal response's output when the stream carried
// none of it as deltas (a server that only sends the finished response).
func (d *responsesDecoder) replayOutput(resp []byte, emit wire.Emit) error {
	res, err := ResponsesCodec{}.ParseChat(resp)
	if err != nil {
		return err
	}
	for _, tb := range res.ThinkingBlocks {
		d.b.AddThinkingBlock(tb)
	}
	evs := make([]llm.Event, 0, 3+len(res.ToolCalls))
	if res.Reasoning != "" {
		evs = append(evs, llm.Event{Type: llm.EventReasoning, Text: res.Reasoning})
	}
	if res.Content != "" {
		evs = append(evs, llm.Event{Type: llm.EventText, Text: res.Content})
	}
	if res.Refusal != "" {
		evs = append(evs, llm.Event{Type: llm.EventRefusal, Text: res.Refusal})
	}
	for _, ev := range evs {
		if err := d.send(emit, ev); err != nil {
			return err
		}
	}
	for _, tc := range res.ToolCalls {
		pos := len(d.argsSeen)
		d.argsSeen = append(d.argsSeen, true)
		if err := d.send(emit, llm.Event{Type: llm.EventToolCallStart, ToolIndex: pos, ToolCallID: tc.ID, ToolName: tc.Name, Text: tc.Arguments}); err != nil {
			return err
		}
	}
	return nil
}

// errorEvent turns an `error` event into an *llm.APIError. OpenAI nests the
// error ({"type":"error","error":{type,code,message}}); older streams put
// code and message at the top level.
func (d *responsesDecoder) errorEvent(ev *responsesEvent, data []byte) error {
	if isObject(ev.errv) {
		info, status := errorFromBody(&errorBody{Error: ev.errv})
		if info != (wire.ErrorInfo{}) {
			return apiError(info, status)
		}
	}
	var info wire.ErrorInfo
	info.Code, _ = flexValue(ev.code)
	info.Message, _ = flexValue(ev.message)
	if info == (wire.ErrorInfo{}) {
		info.Message = clip(data)
	}
	return apiError(info, numericCode(info.Code))
}

// flexValue decodes a string, number or boolean as text.
func flexValue(v []byte) (string, error) {
	switch firstByte(v) {
	case '"':
		return jsonscan.String(v)
	case 0, 'n', '{', '[':
		return "", nil
	}
	return string(trimSpace(v)), nil
}

func isEmptyArray(v []byte) bool {
	a := jsonscan.NewArray(v)
	return !a.Next()
}
