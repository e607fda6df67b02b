package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

var errEmptyBody = errors.New("empty body")

// decoder decodes a Gemini answer, one GenerateContentResponse at a time.
// It walks each chunk with jsonscan and decodes only the values it emits.
type decoder struct {
	b llm.ResultBuilder

	// text is the answer's text so far, kept here rather than in b (see
	// textBuf): Result's Content is all of it.
	text textBuf

	complete bool
	finished bool // an EventFinish was emitted
	hasID    bool
	hasModel bool

	usage    llm.Usage
	hasUsage bool
	usageRaw []byte // the last usageMetadata text parsed
	// usages holds the values usage events point to (see newUsage), and
	// nUsage counts them.
	usages []llm.Usage
	nUsage int

	// thought accumulates consecutive thought parts not yet closed by a
	// signature or a non-thought part.
	thought     strings.Builder
	thoughtOpen bool

	// partial is the function call whose arguments are being streamed
	// (Vertex AI partialArgs), or nil.
	partial *partialCall

	// parts holds the parts of the chunk being decoded, walked but not
	// yet applied (see Feed).
	parts []rawPart
	// tail is the bytes after the last chunk's leading candidates member,
	// when that chunk was applied whole (see Feed).
	tail []byte
	// before and after are the last chunk's bytes around its text value,
	// when that chunk was a plain text delta (see textOnly); empty
	// otherwise.
	before, after []byte
}

// partialCall is a function call streamed as partialArgs fragments.
type partialCall struct {
	pos int
	w   argsWriter
}

func decodeError(what string, err error) *llm.DecodeError {
	return &llm.DecodeError{Provider: providerName, Err: fmt.Errorf("gemini %s: %w", what, err)}
}

// Feed decodes one GenerateContentResponse chunk. It never asks the reader
// to stop: a Gemini stream ends with its body.
//
// The chunk is walked once, in place, before anything is applied: the walk
// collects the first candidate's parts and the other members as raw
// slices, and only a chunk that is whole (the walk checks its syntax, and
// nothing may follow it) reaches the result and the caller. A truncated
// chunk emits nothing.
//
// Gemini repeats everything after the candidates (usageMetadata,
// modelVersion, responseId) byte for byte in most chunks. When the
// candidates are the first member and the bytes after them equal the
// previous chunk's, which was walked whole and applied without error, they
// are not walked again: they would change nothing (usage is emitted only
// when it changes, the ids are kept once). That is about two thirds of a
// text chunk's bytes.
func (d *decoder) Feed(_, data []byte, emit wire.Emit) (bool, error) {
	if isBlank(data) {
		return false, nil
	}
	if ok, err := d.textOnly(data, emit); ok {
		return false, err
	}
	d.before, d.after = d.before[:0], d.after[:0]
	var usage, feedback, errv, rid, mv, fr []byte
	hasCandidate, sameTail := false, false
	tailAt := 0 // where the bytes after a leading candidates member start
	d.parts = d.parts[:0]
	o := jsonscan.NewObject(data)
	for first := true; o.Next(); first = false {
		switch string(o.Key()) {
		case "candidates":
			// Walked in place, the first candidate only: every byte of the
			// candidate is scanned once.
			arr := o.Array()
			if arr.Next() {
				hasCandidate = true
				c := arr.Object()
				var err error
				if fr, err = d.candidate(&c); err != nil {
					return false, err
				}
				arr.Consumed(c.End())
			}
			for arr.Next() {
			}
			if err := arr.Err(); err != nil {
				return false, decodeError("candidates", err)
			}
			o.Consumed(arr.End())
			if first && hasCandidate {
				tailAt = arr.End()
				if len(d.tail) > 0 && string(data[tailAt:]) == string(d.tail) {
					sameTail = true
				}
			}
		case "usageMetadata":
			usage = o.Value()
		case "promptFeedback":
			feedback = o.Value()
		case "error":
			errv = o.Value()
		case "responseId":
			rid = o.Value()
		case "modelVersion":
			mv = o.Value()
		}
		if sameTail {
			break
		}
	}
	if !sameTail {
		if err := o.Err(); err != nil {
			return false, decodeError("chunk", err)
		}
		if !isBlank(data[o.End():]) {
			return false, decodeError("chunk", jsonscan.ErrSyntax)
		}
	}

	finish, finishSeen := finishFromRaw(fr)
	for i := range d.parts {
		if err := d.part(&d.parts[i], emit); err != nil {
			return false, err
		}
	}
	if !sameTail {
		if err := d.rest(usage, feedback, errv, rid, mv, hasCandidate, &finish, &finishSeen, emit); err != nil {
			d.tail = d.tail[:0]
			return false, err
		}
		// A finished answer seldom sends more: its tail (the longest, with
		// the final counts) is not worth a copy.
		if tailAt == 0 || finishSeen {
			d.tail = d.tail[:0]
		} else {
			d.tail = append(d.tail[:0], data[tailAt:]...)
		}
	}
	if tailAt > 0 && !finishSeen {
		d.keepTemplate(data)
	}

	if finishSeen {
		if err := d.closePartial(emit); err != nil {
			return false, err
		}
		d.complete = true
		if !d.finished {
			d.finished = true
			ev := llm.Event{Type: llm.EventFinish, Finish: wire.FinishFor(finish, d.b.ToolCallCount())}
			if !d.send(ev, emit) {
				return false, wire.ErrAborted
			}
		}
	}
	return false, nil
}

// textOnly decodes a chunk that is the last one with another text: the
// same bytes before the first part's text value and after it. That chunk
// was a plain text delta (keepTemplate says when), walked whole and
// applied; this one can differ from it only by its text, so its one event
// is that text. ok is false when the chunk is not such a chunk, or its text
// does not decode (the whole walk then says why).
func (d *decoder) textOnly(data []byte, emit wire.Emit) (bool, error) {
	n := len(d.before)
	if n == 0 || len(data) <= n || string(data[:n]) != string(d.before) {
		return false, nil
	}
	d.text.reserve(len(data) - n - len(d.after))
	start := len(d.text.cur)
	text, m, err := jsonscan.AppendStringPrefix(d.text.cur, data[n:])
	if err != nil || string(data[n+m:]) != string(d.after) {
		return false, nil
	}
	d.text.keep(text)
	if !d.emitText(start, emit) {
		return true, wire.ErrAborted
	}
	return true, nil
}

// emitText emits the text that decoding a part appended to d.text's
// current block from start on, if any.
func (d *decoder) emitText(start int, emit wire.Emit) bool {
	s := d.text.view(start)
	if s == "" {
		return true
	}
	return emit(llm.Event{Type: llm.EventText, Text: s})
}

// keepTemplate records data's bytes around its text value when data, just
// applied whole with its candidates first and no finish, was a plain text
// delta: one part holding a string text and nothing else that acts
// (thought, signature, call, image), with no call or thought left open.
func (d *decoder) keepTemplate(data []byte) {
	if len(d.parts) != 1 || d.partial != nil || d.thoughtOpen {
		return
	}
	p := &d.parts[0]
	if !p.hasText || p.thought || p.sig != nil || p.fc != nil || p.inline != nil || len(p.text) < 2 || p.text[0] != '"' {
		return
	}
	// p.text is a slice of data (the walk is in place): its offset is
	// what its capacity lacks.
	ts := cap(data) - cap(p.text)
	te := ts + len(p.text)
	if ts <= 0 || te > len(data) || &data[ts] != &p.text[0] {
		return
	}
	d.before = append(d.before[:0], data[:ts]...)
	d.after = append(d.after[:0], data[te:]...)
}

// rest applies the members of a chunk other than its candidates: an
// in-band error, the ids, a blocked prompt and the usage.
func (d *decoder) rest(usage, feedback, errv, rid, mv []byte, hasCandidate bool, finish *llm.FinishReason, finishSeen *bool, emit wire.Emit) error {
	if !jsonscan.IsNull(errv) {
		// An error in a 200 answer: whatever its shape, the answer failed.
		e, _ := parseErrorObject(errv)
		if e.message == "" && jsonscan.IsString(errv) {
			e.message, _ = jsonscan.String(errv)
		}
		return apiError(e)
	}
	if err := d.meta(rid, mv); err != nil {
		return err
	}

	if !hasCandidate && !jsonscan.IsNull(feedback) && blocked(jsonscan.Get(feedback, "blockReason")) {
		*finish, *finishSeen = llm.FinishContentFilter, true
	}

	// Most chunks repeat the previous usageMetadata byte for byte, or change
	// one count: parse it only when its text changed.
	if !jsonscan.IsNull(usage) && !bytes.Equal(usage, d.usageRaw) {
		if *finishSeen {
			d.usageRaw = d.usageRaw[:0] // as for the tail: not worth a copy
		} else {
			d.usageRaw = append(d.usageRaw[:0], usage...)
		}
		u, ok, err := parseUsage(usage)
		if err != nil {
			return err
		}
		if ok && (!d.hasUsage || u != d.usage) {
			d.usage, d.hasUsage = u, true
			if !d.send(llm.Event{Type: llm.EventUsage, Usage: d.newUsage(u)}, emit) {
				return wire.ErrAborted
			}
		}
	}
	return nil
}

// newUsage returns a pointer to a copy of u for a usage event. The copies
// are handed out of small arrays, never written again once handed out: a
// stream whose every chunk changes the usage (Vertex AI's counts grow
// chunk by chunk) allocates about one array per eight events instead of
// one value per event; the first few arrays are of one and two values, so
// a stream with one or two usage events allocates no more than before.
func (d *decoder) newUsage(u llm.Usage) *llm.Usage {
	if len(d.usages) == cap(d.usages) {
		d.usages = make([]llm.Usage, 0, min(max(d.nUsage, 1), 8))
	}
	d.nUsage++
	d.usages = append(d.usages, u)
	return &d.usages[len(d.usages)-1]
}

// send applies ev to the result and emits it. Text events go through
// emitText instead: their text is kept in d.text, not in d.b.
func (d *decoder) send(ev llm.Event, emit wire.Emit) bool {
	d.b.Apply(&ev)
	return emit(ev)
}

// meta records responseId and modelVersion the first time they appear.
func (d *decoder) meta(rid, mv []byte) error {
	var id, model string
	if !d.hasID && len(rid) > 0 && !jsonscan.IsNull(rid) {
		s, err := jsonscan.String(rid)
		if err != nil {
			return decodeError("responseId", err)
		}
		id, d.hasID = s, s != ""
	}
	if !d.hasModel && len(mv) > 0 && !jsonscan.IsNull(mv) {
		s, err := jsonscan.String(mv)
		if err != nil {
			return decodeError("modelVersion", err)
		}
		model, d.hasModel = s, s != ""
	}
	if id != "" || model != "" {
		d.b.SetMeta(id, model)
	}
	return nil
}

// candidate walks the first candidate in place: it collects its parts
// (d.parts) and returns its raw finishReason.
func (d *decoder) candidate(o *jsonscan.Object) ([]byte, error) {
	var fr []byte
	for o.Next() {
		switch string(o.Key()) {
		case "content":
			content := o.Object()
			for content.Next() {
				if !content.KeyIs("parts") {
					continue
				}
				parts := content.Array()
				for parts.Next() {
					p := parts.Object()
					if err := d.collectPart(&p); err != nil {
						return nil, err
					}
					parts.Consumed(p.End())
				}
				if err := parts.Err(); err != nil {
					return nil, decodeError("parts", err)
				}
				content.Consumed(parts.End())
			}
			if err := content.Err(); err != nil {
				return nil, decodeError("content", err)
			}
			o.Consumed(content.End())
		case "finishReason":
			fr = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return nil, decodeError("candidate", err)
	}
	return fr, nil
}

// rawPart is one content part as walked: raw values, nothing decoded.
type rawPart struct {
	text, sig, fc, inline []byte
	hasText, thought      bool
}

// collectPart walks one content part and appends it to d.parts.
func (d *decoder) collectPart(o *jsonscan.Object) error {
	var p rawPart
	for o.Next() {
		switch string(o.Key()) {
		case "text":
			p.text, p.hasText = o.Value(), true
		case "thought":
			p.thought = jsonscan.Bool(o.Value())
		case "thoughtSignature":
			p.sig = o.Value()
		case "functionCall":
			p.fc = o.Value()
		case "inlineData":
			p.inline = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeError("part", err)
	}
	d.parts = append(d.parts, p)
	return nil
}

// part applies one content part.
func (d *decoder) part(p *rawPart, emit wire.Emit) error {
	text, sig, fc, inline := p.text, p.sig, p.fc, p.inline
	hasText, thought := p.hasText, p.thought
	signature, err := jsonscan.String(sig)
	if err != nil {
		return decodeError("thoughtSignature", err)
	}

	if !jsonscan.IsNull(fc) {
		return d.functionCall(fc, signature, emit)
	}
	// Any other part ends an argument stream that was left open.
	if err := d.closePartial(emit); err != nil {
		return err
	}
	switch {
	case hasText && thought:
		s, err := jsonscan.String(text)
		if err != nil {
			return decodeError("text", err)
		}
		if s != "" {
			d.thought.WriteString(s)
			d.thoughtOpen = true
			if !d.send(llm.Event{Type: llm.EventReasoning, Text: s}, emit) {
				return wire.ErrAborted
			}
		}
		if signature != "" {
			d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Text: d.thought.String(), Signature: signature})
			d.thought.Reset()
			d.thoughtOpen = false
		}
	case hasText:
		d.flushThought()
		d.text.reserve(len(text))
		start := len(d.text.cur)
		t, err := jsonscan.AppendString(d.text.cur, text)
		if err != nil {
			return decodeError("text", err)
		}
		d.text.keep(t)
		if !d.emitText(start, emit) {
			return wire.ErrAborted
		}
		if signature != "" {
			d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Signature: signature})
		}
	case !jsonscan.IsNull(inline):
		d.flushThought()
		img, ok, err := inlineImage(inline)
		if err != nil {
			return err
		}
		if ok {
			d.b.AddImage(img)
		}
		// An image part's signature is not kept: Message() does not replay
		// images, and a text part must not carry it instead.
	case signature != "":
		// A bare signature part: keep it as a text part's signature.
		d.flushThought()
		d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Signature: signature})
	}
	return nil
}

// flushThought closes the pending unsigned thought block.
func (d *decoder) flushThought() {
	if !d.thoughtOpen {
		return
	}
	d.b.AddThinkingBlock(llm.ThinkingBlock{Format: formatName, Text: d.thought.String()})
	d.thought.Reset()
	d.thoughtOpen = false
}

// functionCall decodes a functionCall part. Gemini sends whole calls
// ({name, args, id}); Vertex AI may instead stream one call over several
// parts: {name, willContinue:true}, then {partialArgs:[...], willContinue}
// parts without a name, ended by a part without willContinue.
func (d *decoder) functionCall(fc []byte, signature string, emit wire.Emit) error {
	var name, args, id, partial []byte
	willContinue := false
	o := jsonscan.NewObject(fc)
	for o.Next() {
		switch string(o.Key()) {
		case "name":
			name = o.Value()
		case "args":
			args = o.Value()
		case "id":
			id = o.Value()
		case "partialArgs":
			partial = o.Value()
		case "willContinue":
			willContinue = jsonscan.Bool(o.Value())
		}
	}
	if err := o.Err(); err != nil {
		return decodeError("functionCall", err)
	}
	fname, err := jsonscan.String(name)
	if err != nil {
		return decodeError("functionCall.name", err)
	}
	if fname == "" {
		// A continuation of a streamed call, or the empty terminal marker.
		if d.partial == nil {
			return nil
		}
		if err := d.applyPartial(partial, emit); err != nil {
			return err
		}
		if signature != "" {
			d.b.SetToolSignature(d.partial.pos, signature)
		}
		if !willContinue {
			return d.closePartial(emit)
		}
		return nil
	}

	if err := d.closePartial(emit); err != nil {
		return err
	}
	d.flushThought()
	pos := d.b.ToolCallCount()
	callID, err := jsonscan.String(id)
	if err != nil {
		return decodeError("functionCall.id", err)
	}
	if callID == "" {
		callID = "call_" + strconv.Itoa(pos)
	}
	ev := llm.Event{Type: llm.EventToolCallStart, ToolIndex: pos, ToolCallID: callID, ToolName: fname, Signature: signature}
	if willContinue {
		d.partial = &partialCall{pos: pos}
		ev.Text = d.partial.w.start()
		if !d.send(ev, emit) {
			return wire.ErrAborted
		}
		return d.applyPartial(partial, emit)
	}
	if jsonscan.IsNull(args) {
		ev.Text = "{}"
	} else {
		// jsonscan only matches brackets; a call's arguments are checked in
		// full (calls are rare next to text deltas).
		if !json.Valid(args) {
			return decodeError("functionCall.args", jsonscan.ErrSyntax)
		}
		ev.Text = string(appendCompact(nil, args))
	}
	if !d.send(ev, emit) {
		return wire.ErrAborted
	}
	return nil
}

// applyPartial feeds partialArgs fragments to the open call and emits the
// argument text they produce.
func (d *decoder) applyPartial(partial []byte, emit wire.Emit) error {
	if jsonscan.IsNull(partial) || d.partial == nil {
		return nil
	}
	arr := jsonscan.NewArray(partial)
	w := &d.partial.w
	w.out = w.out[:0]
	for arr.Next() {
		if err := w.apply(arr.Value()); err != nil {
			return decodeError("partialArgs", err)
		}
	}
	if err := arr.Err(); err != nil {
		return decodeError("partialArgs", err)
	}
	if len(w.out) == 0 {
		return nil
	}
	ev := llm.Event{Type: llm.EventToolCallDelta, ToolIndex: d.partial.pos, Text: string(w.out)}
	if !d.send(ev, emit) {
		return wire.ErrAborted
	}
	return nil
}

// closePartial ends the open streamed call, emitting the text that closes
// its arguments.
func (d *decoder) closePartial(emit wire.Emit) error {
	if d.partial == nil {
		return nil
	}
	p := d.partial
	d.partial = nil
	p.w.out = p.w.out[:0]
	p.w.finish()
	if len(p.w.out) == 0 {
		return nil
	}
	if !d.send(llm.Event{Type: llm.EventToolCallDelta, ToolIndex: p.pos, Text: string(p.w.out)}, emit) {
		return wire.ErrAborted
	}
	return nil
}

// inlineImage decodes an inlineData blob; ok is false for non-image data.
func inlineImage(v []byte) (llm.Part, bool, error) {
	var mime string
	var data []byte
	o := jsonscan.NewObject(v)
	for o.Next() {
		switch string(o.Key()) {
		case "mimeType":
			s, err := jsonscan.String(o.Value())
			if err != nil {
				return llm.Part{}, false, decodeError("inlineData.mimeType", err)
			}
			mime = s
		case "data":
			data = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return llm.Part{}, false, decodeError("inlineData", err)
	}
	if !strings.HasPrefix(strings.ToLower(mime), "image/") {
		return llm.Part{}, false, nil
	}
	raw, ok := jsonscan.RawString(data)
	if !ok {
		return llm.Part{}, false, decodeError("inlineData.data", jsonscan.ErrSyntax)
	}
	enc := base64.StdEncoding
	if len(raw)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	for _, c := range raw {
		if c == '-' || c == '_' {
			enc = base64.URLEncoding
			if len(raw)%4 != 0 {
				enc = base64.RawURLEncoding
			}
			break
		}
	}
	out := make([]byte, enc.DecodedLen(len(raw)))
	n, err := enc.Decode(out, raw)
	if err != nil {
		return llm.Part{}, false, decodeError("inlineData.data", err)
	}
	return llm.Part{Type: llm.PartImage, MIMEType: mime, Data: out[:n]}, true, nil
}

// parseUsage maps usageMetadata. ok is false when it holds no token count
// (Vertex AI sends {"trafficType":...} alone mid-stream).
func parseUsage(v []byte) (u llm.Usage, ok bool, err error) {
	var prompt, cached, cand, thoughts, toolUse int
	o := jsonscan.NewObject(v)
	for o.Next() {
		var dst *int
		switch string(o.Key()) {
		case "promptTokenCount":
			dst = &prompt
		case "cachedContentTokenCount":
			dst = &cached
		case "candidatesTokenCount":
			dst = &cand
		case "thoughtsTokenCount":
			dst = &thoughts
		case "toolUsePromptTokenCount":
			dst = &toolUse
		default:
			continue
		}
		n, e := jsonscan.Int(o.Value())
		if e != nil {
			return llm.Usage{}, false, decodeError("usageMetadata", e)
		}
		*dst, ok = n, true
	}
	if e := o.Err(); e != nil {
		return llm.Usage{}, false, decodeError("usageMetadata", e)
	}
	p := prompt - cached
	if p < 0 {
		p = 0
	}
	return llm.Usage{
		PromptTokens:     p + toolUse,
		CacheReadTokens:  cached,
		CompletionTokens: cand + thoughts,
		ReasoningTokens:  thoughts,
	}, ok, nil
}

// Complete reports whether a finish reason or a prompt block was seen.
func (d *decoder) Complete() bool { return d.complete }

// Result returns everything accumulated so far. A thought block still open
// (no signature or later part closed it yet) is included as the last block.
func (d *decoder) Result() *llm.ChatResult {
	r := d.b.Result()
	r.Content = d.text.String()
	if d.thoughtOpen {
		r.ThinkingBlocks = append(r.ThinkingBlocks, llm.ThinkingBlock{Format: formatName, Text: d.thought.String()})
	}
	return r
}

// appendCompact appends the JSON value v without insignificant whitespace.
// v must be well-formed.
func appendCompact(dst, v []byte) []byte {
	inStr := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if inStr {
			dst = append(dst, c)
			switch c {
			case '\\':
				if i+1 < len(v) {
					i++
					dst = append(dst, v[i])
				}
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\r', '\t':
			continue
		case '"':
			inStr = true
		}
		dst = append(dst, c)
	}
	return dst
}
