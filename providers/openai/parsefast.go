package openai

import (
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// parseChatFast parses the common buffered answer (one choice, a text or
// refusal message, no tool calls, images or error) by walking it with
// jsonscan instead of unmarshalling it: encoding/json was about a quarter
// of a small buffered request's whole in-process cost through the runtime
// (BenchmarkMemChatRuntime). ok is false for anything else, and for
// anything where encoding/json could read the body differently (invalid
// JSON, a known key twice, in another case or escaped, a value of an
// unexpected type): parseChatSlow then parses it, so the result is
// always what it would return (FuzzParseChatFast checks that).
func parseChatFast(body []byte) (*llm.ChatResult, bool) {
	if !jsonscan.Strict(body) {
		return nil, false
	}
	var id, model, choices, usage, fp, tier []byte
	o := jsonscan.NewObject(body)
	for o.Next() {
		k := o.Key()
		switch string(k) {
		case "id":
			if id != nil {
				return nil, false
			}
			id = o.Value()
		case "model":
			if model != nil {
				return nil, false
			}
			model = o.Value()
		case "choices":
			if choices != nil {
				return nil, false
			}
			choices = o.Value()
		case "usage":
			if usage != nil {
				return nil, false
			}
			usage = o.Value()
		case "error":
			if !jsonscan.IsNull(o.Value()) {
				return nil, false
			}
		case "system_fingerprint":
			if fp != nil {
				return nil, false
			}
			fp = o.Value()
		case "service_tier":
			if tier != nil {
				return nil, false
			}
			tier = o.Value()
		default:
			if unsureKey(k, "id", "model", "choices", "usage", "error", "system_fingerprint", "service_tier") {
				return nil, false
			}
		}
	}
	if o.Err() != nil || !stringOrNull(id) || !stringOrNull(model) || !stringOrNull(fp) || !stringOrNull(tier) {
		return nil, false
	}
	res := &llm.ChatResult{}
	var err error
	if fp != nil && !jsonscan.IsNull(fp) {
		if res.Meta.SystemFingerprint, err = jsonscan.String(fp); err != nil {
			return nil, false
		}
	}
	if tier != nil && !jsonscan.IsNull(tier) {
		if res.Meta.ServiceTier, err = jsonscan.String(tier); err != nil {
			return nil, false
		}
	}
	if res.ID, err = jsonscan.String(id); err != nil {
		return nil, false
	}
	if res.Model, err = jsonscan.String(model); err != nil {
		return nil, false
	}
	u, ok, err := parseUsage(usage)
	if err != nil {
		return nil, false
	}
	if ok {
		res.Usage = u
	}
	if jsonscan.IsNull(choices) {
		return res, true
	}
	var choice []byte
	a := jsonscan.NewArray(choices)
	for a.Next() {
		if choice != nil {
			return nil, false // several choices: the slow path picks one
		}
		choice = a.Value()
	}
	if a.Err() != nil {
		return nil, false
	}
	if choice == nil {
		return res, true
	}
	return res, fastChoice(res, choice)
}

// fastChoice fills res from the one choice, or reports false.
func fastChoice(res *llm.ChatResult, choice []byte) bool {
	if len(choice) == 0 || choice[0] != '{' {
		return false
	}
	var index, message, finish []byte
	o := jsonscan.NewObject(choice)
	for o.Next() {
		k := o.Key()
		switch string(k) {
		case "index":
			if index != nil {
				return false
			}
			index = o.Value()
		case "message":
			if message != nil {
				return false
			}
			message = o.Value()
		case "finish_reason":
			if finish != nil {
				return false
			}
			finish = o.Value()
		case "logprobs":
			if !jsonscan.IsNull(o.Value()) {
				return false // the slow path reads them
			}
		default:
			if unsureKey(k, "index", "message", "finish_reason", "logprobs") {
				return false
			}
		}
	}
	if o.Err() != nil || (index != nil && string(index) != "0") || len(message) == 0 || message[0] != '{' {
		return false
	}
	var content, refusal, rc, rs, rd []byte
	m := jsonscan.NewObject(message)
	for m.Next() {
		k := m.Key()
		var dst *[]byte
		switch string(k) {
		case "content":
			dst = &content
		case "refusal":
			dst = &refusal
		case "reasoning_content":
			dst = &rc
		case "reasoning":
			dst = &rs
		case "reasoning_details":
			dst = &rd
		case "tool_calls", "function_call", "images":
			if !jsonscan.IsNull(m.Value()) {
				return false
			}
			continue
		default:
			if unsureKey(k, "content", "refusal", "reasoning_content", "reasoning", "reasoning_details", "tool_calls", "function_call", "images") {
				return false
			}
			continue
		}
		if *dst != nil {
			return false
		}
		*dst = m.Value()
	}
	if m.Err() != nil {
		return false
	}
	var partsRefusal string
	if len(content) > 0 && content[0] == '"' {
		s, err := jsonscan.String(content)
		if err != nil {
			return false
		}
		res.Content = s
	} else {
		res.Content, partsRefusal = messageContent(content)
	}
	var ok bool
	if res.Refusal, ok = flexText(refusal); !ok {
		return false
	}
	if res.Refusal == "" {
		res.Refusal = partsRefusal
	}
	rcs, ok1 := flexText(rc)
	rss, ok2 := flexText(rs)
	if !ok1 || !ok2 {
		return false
	}
	switch {
	case rcs != "":
		res.Reasoning = rcs
	case rss != "":
		res.Reasoning = rss
	default:
		s, err := foldReasoningDetails(rd)
		if err != nil {
			return false
		}
		res.Reasoning = s
	}
	var fr llm.FinishReason
	if hasFinish(finish) {
		fr = mapFinish(finish)
	}
	res.FinishReason = wire.FinishFor(wire.RefusalFinish(fr, res.Refusal != ""), 0)
	return true
}

// flexText is flexString's reading of a raw value: a string decoded,
// true, false or a number as their text, anything else "".
func flexText(v []byte) (string, bool) {
	if len(v) == 0 {
		return "", true
	}
	switch v[0] {
	case '"':
		s, err := jsonscan.String(v)
		return s, err == nil
	case 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(v), true
	}
	return "", true
}

// stringOrNull reports whether v is absent, null or a string.
func stringOrNull(v []byte) bool {
	return v == nil || jsonscan.IsNull(v) || jsonscan.IsString(v)
}

// unsureKey reports whether encoding/json might read key k as one of the
// known fields: k holds an escape, or matches one of them in another case.
func unsureKey(k []byte, known ...string) bool {
	for _, c := range k {
		if c == '\\' || c >= 0x80 {
			return true
		}
	}
	for _, n := range known {
		if len(k) == len(n) && strings.EqualFold(string(k), n) {
			return true
		}
	}
	return false
}
