package openai

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// legacyFunctionIndex is the tool index given to a legacy delta.function_call
// so that it never collides with a tool_calls entry.
const legacyFunctionIndex = -1

// maxErrorText caps the raw text kept from an error event with no known shape.
const maxErrorText = 512

// emptyArguments is the arguments text of a call that sent none.
const emptyArguments = "{}"

// NewStreamDecoder returns a decoder for one streamed chat completion.
func (Codec) NewStreamDecoder() wire.StreamDecoder { return &streamDecoder{} }

// streamDecoder walks each chunk with jsonscan: no chunk is unmarshalled,
// only the strings that become events are decoded. It is not safe for
// concurrent use.
type streamDecoder struct {
	b     llm.ResultBuilder
	tools wire.ToolAssembler

	complete bool

	finishSent bool
	finish     llm.FinishReason

	usageSent bool
	usage     llm.Usage

	// argsSeen[pos] records whether call pos received any argument text.
	argsSeen []bool

	haveID, haveModel bool
	haveFP, haveTier  bool // system_fingerprint, service_tier: read once

	// pending holds the events of the chunk being decoded (see send).
	pending []llm.Event

	// prefix is the last chunk's members before "choices" (the opening
	// brace up to the comma before the key), when they were all plain
	// metadata (see plainKey). OpenAI repeats them byte for byte in every
	// chunk (id, object, created, model, service_tier, system_fingerprint):
	// a chunk that starts with the same bytes resumes its walk at the
	// comma, since walking them again would change nothing. That is about
	// 40% of a content chunk's bytes.
	prefix []byte

	// before and after are the last chunk's bytes around the first
	// choice's content value, after ending with the choices array, when
	// that chunk was a plain content delta (see keepTemplate); empty
	// otherwise. A chunk with the same bytes around another string is
	// decoded as that text, and only its members after choices are walked.
	before, after []byte
	// content is the current chunk's content value when its delta may
	// make it a template (see delta), or nil.
	content []byte
}

// plainKey reports whether a top-level member can be skipped when its bytes
// repeat the previous chunk's: only id and model are read, and only once.
// choices, usage, error and x_groq (and anything unknown, to be safe) are
// walked every time.
func plainKey(k []byte) bool {
	switch string(k) {
	case "id", "object", "created", "model", "service_tier", "system_fingerprint", "provider", "citations":
		return true
	}
	return false
}

func (d *streamDecoder) Complete() bool          { return d.complete }
func (d *streamDecoder) Result() *llm.ChatResult { return d.b.Result() }

// send queues an event of the chunk being decoded. The choices are walked
// in place, so a chunk's events are known before the chunk is known to be
// whole: they reach the result and the caller only once the chunk parsed
// (flush), and a truncated chunk emits nothing. This costs no allocation
// once the queue has grown; checking the chunk first would cost a second
// scan (+40% instructions per delta under callgrind).
func (d *streamDecoder) send(ev llm.Event) error {
	d.pending = append(d.pending, ev)
	return nil
}

// flush applies and emits the chunk's queued events, in order.
func (d *streamDecoder) flush(emit wire.Emit) error {
	for i := range d.pending {
		ev := &d.pending[i]
		d.b.Apply(ev)
		if !emit(*ev) {
			clear(d.pending)
			d.pending = d.pending[:0]
			return wire.ErrAborted
		}
	}
	clear(d.pending)
	d.pending = d.pending[:0]
	return nil
}

func decodeErr(what string, err error) error {
	return &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("stream %s: %w", what, err)}
}

var errNotObject = errors.New("chunk is not a JSON object")

// Feed decodes one SSE event: a chat.completion.chunk, the [DONE] sentinel,
// or an error (an `event: error` or a chunk holding an error object).
func (d *streamDecoder) Feed(name, data []byte, emit wire.Emit) (bool, error) {
	done, err := d.feed(name, data)
	if err != nil && !isAPIError(err) {
		// A malformed chunk: none of it reaches the result or the caller.
		clear(d.pending)
		d.pending = d.pending[:0]
		return done, err
	}
	// A whole chunk, possibly carrying an in-band error after its events
	// (OpenRouter sends usage and finish with the error): its events first.
	if ferr := d.flush(emit); ferr != nil {
		return done, ferr
	}
	return done, err
}

func (d *streamDecoder) feed(name, data []byte) (bool, error) {
	data = trimSpace(data)
	if len(data) == 0 {
		return false, nil
	}
	if string(name) == "error" {
		return false, d.errorEvent(data)
	}
	if data[0] != '{' {
		if string(data) == "[DONE]" {
			d.complete = true
			return true, d.closeEmptyCalls()
		}
		return false, decodeErr("chunk", errNotObject)
	}

	var usage, errv, xgroq, finish []byte
	o, templated := d.template(data)
	resumed := templated
	if !templated {
		d.before, d.after = d.before[:0], d.after[:0]
		o, resumed = d.resume(data)
	}
	plain := !resumed   // every member so far is plain and walked
	plainBefore := true // every member before choices is plain
	choicesEnd := 0     // where the one choices array ended
	var content []byte  // its one choice's content, if it may be a template
	for o.Next() {
		if plain && !plainKey(o.Key()) {
			plain = false
			if string(o.Key()) == "choices" {
				d.keepPrefix(data, o.KeyStart())
			}
		}
		if choicesEnd == 0 && !plainKey(o.Key()) && string(o.Key()) != "choices" {
			plainBefore = false
		}
		switch string(o.Key()) {
		case "choices":
			// Walked in place: the choices are scanned once.
			a := o.Array()
			n := 0
			for a.Next() {
				ch := a.Object()
				d.content = nil
				f, err := d.choice(&ch)
				if err != nil {
					return false, err
				}
				a.Consumed(ch.End())
				if f != nil {
					finish = f
				}
				n++
				content = d.content
			}
			if err := a.Err(); err != nil {
				return false, decodeErr("choices", err)
			}
			o.Consumed(a.End())
			if choicesEnd != 0 || n != 1 {
				content = nil // two choices arrays, or not one choice
			}
			choicesEnd = a.End()
		case "usage":
			usage = o.Value()
		case "error":
			errv = o.Value()
		case "x_groq":
			xgroq = o.Value()
		case "id":
			if !d.haveID {
				s, err := jsonscan.String(o.Value())
				if err == nil && s != "" {
					d.b.SetMeta(s, "")
					d.haveID = true
				}
			}
		case "system_fingerprint", "service_tier":
			if fp := o.KeyIs("system_fingerprint"); (fp && !d.haveFP) || (!fp && !d.haveTier) {
				if s, err := jsonscan.String(o.Value()); err == nil && s != "" {
					if fp {
						d.b.SetServedBy(s, "")
						d.haveFP = true
					} else {
						d.b.SetServedBy("", s)
						d.haveTier = true
					}
				}
			}
		case "model":
			if !d.haveModel {
				s, err := jsonscan.String(o.Value())
				if err == nil && s != "" {
					d.b.SetMeta("", s)
					d.haveModel = true
				}
			}
		}
	}
	if err := o.Err(); err != nil {
		return false, decodeErr("chunk", err)
	}

	if jsonscan.IsNull(usage) && len(xgroq) > 0 {
		usage = jsonscan.Get(xgroq, "usage") // Groq without stream_options
	}
	if err := d.usageEvent(usage); err != nil {
		return false, err
	}

	if finish != nil {
		d.complete = true
		if err := d.closeEmptyCalls(); err != nil {
			return false, err
		}
		r := wire.FinishFor(wire.RefusalFinish(mapFinish(finish), d.refused()), d.tools.Len())
		if !d.finishSent || r != d.finish {
			d.finishSent, d.finish = true, r
			if err := d.send(llm.Event{Type: llm.EventFinish, Finish: r}); err != nil {
				return false, err
			}
		}
	}

	if len(errv) > 0 && !jsonscan.IsNull(errv) {
		info, status := errorFromBody(&errorBody{Error: errv})
		if info == (wire.ErrorInfo{}) {
			info.Message = clip(errv)
		}
		return false, apiError(info, status)
	}
	if !templated && plainBefore && content != nil && finish == nil {
		d.keepTemplate(data, content, choicesEnd)
	}
	return false, nil
}

// template returns the iterator of a chunk that is the last plain content
// delta with another text: the same bytes before the first choice's content
// value and from its end to the end of choices. Its text is queued and the
// iterator resumes after choices. ok is false for any other chunk, or when
// its text does not decode (the whole walk then says why).
func (d *streamDecoder) template(data []byte) (o jsonscan.Object, ok bool) {
	n := len(d.before)
	if n == 0 || len(data) <= n || string(data[:n]) != string(d.before) {
		return o, false
	}
	s, m, err := jsonscan.StringPrefix(data[n:])
	e := n + m + len(d.after)
	if err != nil || e > len(data) || string(data[n+m:e]) != string(d.after) {
		return o, false
	}
	if o = jsonscan.ResumeObject(data, e); o.Err() != nil {
		return o, false
	}
	if s != "" {
		_ = d.send(llm.Event{Type: llm.EventText, Text: s})
	}
	return o, true
}

// keepTemplate records the bytes around content (a slice of data: the walk
// is in place, so its offset is what its capacity lacks) up to choicesEnd.
// The chunk was walked whole: its members before choices plain, one choice
// whose only effect was this content text (see delta), and no finish.
func (d *streamDecoder) keepTemplate(data, content []byte, choicesEnd int) {
	cs := cap(data) - cap(content)
	ce := cs + len(content)
	if cs <= 0 || ce > choicesEnd || choicesEnd > len(data) || &data[cs] != &content[0] {
		return
	}
	d.before = append(d.before[:0], data[:cs]...)
	d.after = append(d.after[:0], data[ce:choicesEnd]...)
}

// resume returns the iterator for a chunk: resumed at the end of the
// previous chunk's prefix when data starts with the same bytes, or from the
// start.
func (d *streamDecoder) resume(data []byte) (jsonscan.Object, bool) {
	if n := len(d.prefix); n > 0 && len(data) > n && string(data[:n]) == string(d.prefix) {
		if o := jsonscan.ResumeObject(data, n); o.Err() == nil {
			return o, true
		}
	}
	return jsonscan.NewObject(data), false
}

// keepPrefix records data's members before the key at keyStart, all plain,
// as the prefix the next chunk may skip.
func (d *streamDecoder) keepPrefix(data []byte, keyStart int) {
	i := keyStart - 1
	for i > 0 && isSpaceByte(data[i]) {
		i--
	}
	if i <= 0 || data[i] != ',' {
		d.prefix = d.prefix[:0] // the first member: nothing to skip
		return
	}
	d.prefix = append(d.prefix[:0], data[:i]...)
}

// refused reports whether the answer carries a refusal: in the result, or
// queued from the chunk being decoded.
func (d *streamDecoder) refused() bool {
	if d.b.HasRefusal() {
		return true
	}
	for i := range d.pending {
		if d.pending[i].Type == llm.EventRefusal {
			return true
		}
	}
	return false
}

// choice decodes one element of choices and returns its finish_reason value
// when it is the first choice and has one.
func (d *streamDecoder) choice(o *jsonscan.Object) (finish []byte, err error) {
	var idx int
	var delta, fin, lp []byte
	for o.Next() {
		switch string(o.Key()) {
		case "logprobs":
			lp = o.Value()
		case "index":
			n, err := jsonscan.Int(o.Value())
			if err != nil {
				return nil, decodeErr("choices[].index", err)
			}
			idx = n
		case "delta":
			delta = o.Value()
		case "finish_reason":
			fin = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return nil, decodeErr("choice", err)
	}
	if len(delta) > 0 && !jsonscan.IsNull(delta) {
		if err := d.delta(idx, delta); err != nil {
			return nil, err
		}
	}
	if idx == 0 && len(lp) > 0 && !jsonscan.IsNull(lp) {
		// Only when the request asked for them: decoded with encoding/json,
		// and a chunk that has them is never a template.
		d.content = nil
		var w wireLogprobs
		if err := json.Unmarshal(lp, &w); err != nil {
			return nil, decodeErr("choices[].logprobs", err)
		}
		if len(w.Content) > 0 {
			if err := d.send(llm.Event{Type: llm.EventLogprobs, Logprobs: &llm.TokenLogprobs{Tokens: logprobsOf(w.Content)}}); err != nil {
				return nil, err
			}
		}
	}
	if idx == 0 && hasFinish(fin) {
		return fin, nil
	}
	return nil, nil
}

func (d *streamDecoder) delta(choice int, v []byte) error {
	var content, rc, rs, rd, refusal, tools, fcall, images []byte
	o := jsonscan.NewObject(v)
	for o.Next() {
		switch string(o.Key()) {
		case "images":
			images = o.Value()
		case "content":
			content = o.Value()
		case "reasoning_content":
			rc = o.Value()
		case "reasoning":
			rs = o.Value()
		case "reasoning_details":
			rd = o.Value()
		case "refusal":
			refusal = o.Value()
		case "tool_calls":
			tools = o.Value()
		case "function_call":
			fcall = o.Value()
		}
	}
	if err := o.Err(); err != nil {
		return decodeErr("delta", err)
	}
	// A delta whose only effect is its content text may be the template of
	// the next chunk (see template): nothing else that acts, a null or
	// absent refusal.
	if choice == 0 && jsonscan.IsString(content) && rc == nil && rs == nil && rd == nil && tools == nil && fcall == nil && images == nil && jsonscan.IsNull(refusal) {
		d.content = content
	}

	if choice == 0 {
		// Reasoning: one source per chunk, reasoning_content > reasoning >
		// reasoning_details (gateways often send two of them with the
		// same text).
		s, err := textValue(rc)
		if err != nil {
			return decodeErr("delta.reasoning_content", err)
		}
		if s == "" {
			if s, err = textValue(rs); err != nil {
				return decodeErr("delta.reasoning", err)
			}
		}
		if s == "" && len(rd) > 0 {
			if s, err = foldReasoningDetails(rd); err != nil {
				return decodeErr("delta.reasoning_details", err)
			}
		}
		if s != "" {
			if err := d.send(llm.Event{Type: llm.EventReasoning, Text: s}); err != nil {
				return err
			}
		}
		if len(content) > 0 {
			s, err := textValue(content)
			if err != nil {
				return decodeErr("delta.content", err)
			}
			if s != "" {
				if err := d.send(llm.Event{Type: llm.EventText, Text: s}); err != nil {
					return err
				}
			}
		}
		if len(refusal) > 0 {
			s, err := textValue(refusal)
			if err != nil {
				return decodeErr("delta.refusal", err)
			}
			if s != "" {
				if err := d.send(llm.Event{Type: llm.EventRefusal, Text: s}); err != nil {
					return err
				}
			}
		}
	}

	if choice == 0 && len(images) > 0 && !jsonscan.IsNull(images) {
		// Assistant images (OpenRouter) are rare: decoded with encoding/json,
		// kept for the result; there is no image event.
		var ims []respImage
		if err := json.Unmarshal(images, &ims); err != nil {
			return decodeErr("delta.images", err)
		}
		for _, im := range ims {
			if im.ImageURL.URL != "" {
				d.b.AddImage(imagePart(im.ImageURL.URL))
			}
		}
	}

	if len(tools) > 0 && !jsonscan.IsNull(tools) {
		a := jsonscan.NewArray(tools)
		for a.Next() {
			if err := d.toolCall(choice, a.Value(), false); err != nil {
				return err
			}
		}
		if err := a.Err(); err != nil {
			return decodeErr("delta.tool_calls", err)
		}
	}
	if len(fcall) > 0 && isObject(fcall) {
		if err := d.toolCall(choice, fcall, true); err != nil {
			return err
		}
	}
	return nil
}

// toolCall decodes one tool_calls entry (or a legacy function_call object)
// and emits a start for a new call or a delta for a continuation.
func (d *streamDecoder) toolCall(choice int, v []byte, legacy bool) error {
	index := 0
	var id, fn, name, args []byte
	if legacy {
		index, fn = legacyFunctionIndex, v
	} else {
		o := jsonscan.NewObject(v)
		for o.Next() {
			switch string(o.Key()) {
			case "index":
				n, err := jsonscan.Int(o.Value())
				if err != nil {
					return decodeErr("tool_calls[].index", err)
				}
				index = n
			case "id":
				id = o.Value()
			case "function":
				fn = o.Value()
			}
		}
		if err := o.Err(); err != nil {
			return decodeErr("tool_calls[]", err)
		}
	}
	if len(fn) > 0 && isObject(fn) {
		o := jsonscan.NewObject(fn)
		for o.Next() {
			switch string(o.Key()) {
			case "name":
				name = o.Value()
			case "arguments":
				args = o.Value()
			}
		}
		if err := o.Err(); err != nil {
			return decodeErr("tool_calls[].function", err)
		}
	}
	idStr, err := textValue(id)
	if err != nil {
		return decodeErr("tool_calls[].id", err)
	}
	argStr, err := argumentsValue(args)
	if err != nil {
		return decodeErr("tool_calls[].function.arguments", err)
	}
	pos, isNew := d.tools.Lookup(choice, index, idStr)
	if isNew {
		nameStr, err := textValue(name)
		if err != nil {
			return decodeErr("tool_calls[].function.name", err)
		}
		if nameStr == "" {
			// A call's first chunk names the function it calls (as a
			// buffered answer's call does): without it there is nothing
			// to run and no way to answer it.
			return decodeErr("tool_calls[].function.name", errors.New("a call's first chunk names no function"))
		}
		if idStr == "" {
			idStr = syntheticCallID(pos)
		}
		d.argsSeen = append(d.argsSeen, argStr != "")
		return d.send(llm.Event{
			Type: llm.EventToolCallStart, ToolIndex: pos,
			ToolCallID: idStr, ToolName: nameStr, Text: argStr,
		})
	}
	if argStr == "" {
		return nil
	}
	d.argsSeen[pos] = true
	return d.send(llm.Event{Type: llm.EventToolCallDelta, ToolIndex: pos, Text: argStr})
}

// closeEmptyCalls gives a call whose arguments never arrived (null, "" or
// missing in every chunk) the arguments "{}" when the answer completes, so
// that every completed call carries valid JSON.
func (d *streamDecoder) closeEmptyCalls() error {
	for pos, seen := range d.argsSeen {
		if !seen {
			d.argsSeen[pos] = true
			if err := d.send(llm.Event{Type: llm.EventToolCallDelta, ToolIndex: pos, Text: emptyArguments}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *streamDecoder) usageEvent(v []byte) error {
	if len(v) == 0 || jsonscan.IsNull(v) {
		return nil
	}
	u, ok, err := parseUsage(v)
	if err != nil {
		return decodeErr("usage", err)
	}
	if !ok || (d.usageSent && u == d.usage) {
		return nil
	}
	d.usageSent, d.usage = true, u
	up := new(llm.Usage) // the event's copy; the only allocation a usage chunk makes
	*up = u
	return d.send(llm.Event{Type: llm.EventUsage, Usage: up})
}

// errorEvent turns an `event: error` into an *llm.APIError.
func (d *streamDecoder) errorEvent(data []byte) error {
	info, status := parseErrorInfo(data)
	if info == (wire.ErrorInfo{}) {
		info.Message = clip(data)
	}
	return apiError(info, status)
}

func clip(b []byte) string {
	if len(b) > maxErrorText {
		b = b[:maxErrorText]
	}
	return string(b)
}

// textValue decodes a string value; null, absent and non-string values
// (which some servers send for reasoning fields) are "".
func textValue(v []byte) (string, error) {
	if !jsonscan.IsString(v) {
		return "", nil
	}
	return jsonscan.String(v)
}

// argumentsValue decodes tool-call arguments: a string fragment as itself,
// an object or array (sent whole by some local servers) as its JSON text,
// and null, absent or anything else as "".
func argumentsValue(v []byte) (string, error) {
	switch firstByte(v) {
	case '"':
		return jsonscan.String(v)
	case '{', '[':
		return string(trimSpace(v)), nil
	}
	return "", nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpaceByte(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpaceByte(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// isAPIError reports whether err is an in-band provider error. (Its own
// function: errors.As moves its target to the heap, which must not happen
// on every chunk.)
func isAPIError(err error) bool {
	var api *llm.APIError
	return errors.As(err, &api)
}
