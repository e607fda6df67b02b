package openai

import (
	"strconv"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
)

// decodeChatFast decodes the common small request a gateway serves (a
// model, messages of a system, user or assistant role with string
// content, and any of max_tokens, max_completion_tokens, temperature,
// top_p, stream and stream_options.include_usage) by walking it with
// jsonscan instead of unmarshalling it: encoding/json was the largest
// piece of the gateway's own CPU per request in the peer gateway
// scenario's profile (bench/internal/peergw) after the runtime's call. ok
// is false for anything else, and for anything encoding/json could read
// differently (invalid JSON, a key twice, in another case or escaped, a
// null, a number that is not a plain integer where one is wanted) and for
// a request that fails validation: DecodeChatRequest's own path then
// decodes it, so the result and any error are always what it returns
// (FuzzDecodeChatFast checks that).
func decodeChatFast(body []byte, requireModel bool) (*ServerChat, bool) {
	if !jsonscan.Strict(body) {
		return nil, false
	}
	req := &llm.ChatRequest{}
	out := &ServerChat{Chat: req}
	var seen uint8
	const (
		sModel = 1 << iota
		sMessages
		sMaxTokens
		sMaxCompletion
		sTemperature
		sTopP
		sStream
		sStreamOptions
	)
	once := func(bit uint8) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	maxTokens, maxCompletion := 0, 0
	o := jsonscan.NewObject(body)
	for o.Next() {
		var ok bool
		switch string(o.Key()) {
		case "model":
			if ok = once(sModel); ok {
				req.Model, ok = fastString(o.Value())
			}
		case "messages":
			if ok = once(sMessages); ok {
				req.Messages, ok = fastMessages(o.Value())
			}
		case "max_tokens":
			if ok = once(sMaxTokens); ok {
				maxTokens, ok = fastInt(o.Value())
			}
		case "max_completion_tokens":
			if ok = once(sMaxCompletion); ok {
				maxCompletion, ok = fastInt(o.Value())
			}
		case "temperature":
			if ok = once(sTemperature); ok {
				req.Temperature, ok = fastFloat(o.Value())
			}
		case "top_p":
			if ok = once(sTopP); ok {
				req.TopP, ok = fastFloat(o.Value())
			}
		case "stream":
			if ok = once(sStream); ok {
				out.Stream, ok = fastBool(o.Value())
			}
		case "stream_options":
			if ok = once(sStreamOptions); ok {
				out.IncludeUsage, ok = fastStreamOptions(o.Value())
			}
		}
		if !ok {
			return nil, false
		}
	}
	if o.Err() != nil {
		return nil, false
	}
	req.MaxTokens = maxCompletion
	if req.MaxTokens == 0 {
		req.MaxTokens = maxTokens
	}
	if req.Model == "" && !requireModel {
		req.Model = "-" // validated as if named, as DecodeChatRequest does
		err := req.Validate()
		req.Model = ""
		return out, err == nil
	}
	return out, req.Validate() == nil
}

// fastString is a JSON string's value; not ok for anything else.
func fastString(v []byte) (string, bool) {
	if !jsonscan.IsString(v) {
		return "", false
	}
	s, err := jsonscan.String(v)
	return s, err == nil
}

// fastInt is a plain non-negative integer (digits only, no leading zero,
// at most 9 digits), as encoding/json reads it into an int.
func fastInt(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 9 || (v[0] == '0' && len(v) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// fastFloat is a JSON number, parsed as encoding/json parses one into a
// float64 (strconv.ParseFloat of its text); not ok for null or anything
// else.
func fastFloat(v []byte) (*float64, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return nil, false
	}
	return &f, true
}

func fastBool(v []byte) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// fastStreamOptions is {"include_usage": bool} or {}.
func fastStreamOptions(v []byte) (bool, bool) {
	if len(v) == 0 || v[0] != '{' {
		return false, false
	}
	o := jsonscan.NewObject(v)
	include, seen := false, false
	for o.Next() {
		if string(o.Key()) != "include_usage" || seen {
			return false, false
		}
		seen = true
		var ok bool
		if include, ok = fastBool(o.Value()); !ok {
			return false, false
		}
	}
	return include, o.Err() == nil
}

// fastMessages is an array of {"role": system|user|assistant, "content":
// string}, each key once.
func fastMessages(v []byte) ([]llm.Message, bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	var msgs []llm.Message
	a := jsonscan.NewArray(v)
	for a.Next() {
		mv := a.Value()
		if len(mv) == 0 || mv[0] != '{' {
			return nil, false
		}
		var m llm.Message
		var role, content bool
		o := jsonscan.NewObject(mv)
		for o.Next() {
			var ok bool
			switch string(o.Key()) {
			case "role":
				if !role {
					role = true
					var r string
					r, ok = fastString(o.Value())
					m.Role = llm.Role(r)
					ok = ok && (m.Role == llm.RoleSystem || m.Role == llm.RoleUser || m.Role == llm.RoleAssistant)
				}
			case "content":
				if !content {
					content = true
					m.Content, ok = fastString(o.Value())
				}
			}
			if !ok {
				return nil, false
			}
		}
		if o.Err() != nil || !role || !content {
			return nil, false
		}
		msgs = append(msgs, m)
	}
	return msgs, a.Err() == nil
}
