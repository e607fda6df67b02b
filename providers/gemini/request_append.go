package gemini

import (
	"github.com/chorusrt/chorus/internal/jsonenc"
	"net/http"
	"strconv"

	"github.com/chorusrt/chorus/providers/internal/wire"
)

// The append encoder writes the common generateContent request (text
// parts, with their thought flags and signatures, no tools, no tool
// config, no float sampling controls, no response schema: what a batch
// job's or a chat's plain call sends) straight into one buffer, from the
// generateRequest ChatRequest has built and checked, without reflecting
// over it. Its bytes are exactly encoding/json's for the same value
// (TestAppendRequestMatchesEncodingJSON, FuzzAppendRequest): the fields in
// the structs' order with their omitempty rules, strings escaped as an
// Encoder without HTML escaping escapes them. Anything else goes through
// wire.PostJSON. BenchmarkChatRequest (bench's streamed request): 1.6 ->
// 1.2 µs and 14 -> 12 allocations; most of what remains is building the
// structs (kept: they carry every check and field error) and the header.
// A field added to the structs must be taught here or refused
// (TestAppendRequestKnowsEveryField).

// appendRequest encodes out, or reports false when it holds something
// only encoding/json writes here.
func appendRequest(out *generateRequest) ([]byte, bool) {
	if len(out.Tools) > 0 || out.ToolConfig != nil {
		return nil, false
	}
	if gc := out.GenerationConfig; gc != nil && (gc.Temperature != nil || gc.TopP != nil || len(gc.ResponseJSONSchema) > 0 ||
		gc.TopK != nil || gc.FrequencyPenalty != nil || gc.PresencePenalty != nil || gc.ResponseLogprobs || gc.Logprobs != nil) {
		return nil, false
	}
	if len(out.SafetySettings) > 0 {
		return nil, false
	}
	n := 96 + len(out.CachedContent)
	if out.SystemInstruction != nil {
		n += partsSize(out.SystemInstruction.Parts)
	}
	for i := range out.Contents {
		n += 32 + partsSize(out.Contents[i].Parts)
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	if out.SystemInstruction != nil {
		b = append(b, `"systemInstruction":`...)
		var ok bool
		if b, ok = appendContent(b, out.SystemInstruction); !ok {
			return nil, false
		}
		b = append(b, ',')
	}
	b = append(b, `"contents":`...)
	if out.Contents == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range out.Contents {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendContent(b, &out.Contents[i]); !ok {
				return nil, false
			}
		}
		b = append(b, ']')
	}
	if gc := out.GenerationConfig; gc != nil {
		b = appendGenerationConfig(append(b, `,"generationConfig":`...), gc)
	}
	if out.CachedContent != "" {
		b = appendStdString(append(b, `,"cachedContent":`...), out.CachedContent)
	}
	return append(b, '}'), true
}

// partsSize is about the encoded size of parts' text.
func partsSize(parts []part) int {
	n := 0
	for i := range parts {
		n += 16 + len(parts[i].ThoughtSignature)
		if parts[i].Text != nil {
			n += len(*parts[i].Text) + len(*parts[i].Text)/16
		}
	}
	return n
}

func appendContent(b []byte, c *content) ([]byte, bool) {
	b = append(b, '{')
	if c.Role != "" {
		b = appendStdString(append(b, `"role":`...), c.Role)
		b = append(b, ',')
	}
	b = append(b, `"parts":`...)
	if c.Parts == nil {
		return append(b, "null}"...), true
	}
	b = append(b, '[')
	for i := range c.Parts {
		p := &c.Parts[i]
		if p.InlineData != nil || p.FileData != nil || p.FunctionCall != nil || p.FunctionResponse != nil {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		sep := false
		if p.Text != nil {
			b = appendStdString(append(b, `"text":`...), *p.Text)
			sep = true
		}
		if p.Thought {
			if sep {
				b = append(b, ',')
			}
			b = append(b, `"thought":true`...)
			sep = true
		}
		if p.ThoughtSignature != "" {
			if sep {
				b = append(b, ',')
			}
			b = appendStdString(append(b, `"thoughtSignature":`...), p.ThoughtSignature)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), true
}

// appendGenerationConfig writes gc, which holds no float and no schema.
func appendGenerationConfig(b []byte, gc *generationConfig) []byte {
	b = append(b, '{')
	sep := false
	if gc.MaxOutputTokens != 0 {
		b, sep = appendField(b, sep, "maxOutputTokens")
		b = strconv.AppendInt(b, int64(gc.MaxOutputTokens), 10)
	}
	if len(gc.StopSequences) > 0 {
		b, sep = appendField(b, sep, "stopSequences")
		b = append(b, '[')
		for i, s := range gc.StopSequences {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStdString(b, s)
		}
		b = append(b, ']')
	}
	if gc.Seed != nil {
		b, sep = appendField(b, sep, "seed")
		b = strconv.AppendInt(b, *gc.Seed, 10)
	}
	if gc.ResponseMimeType != "" {
		b, sep = appendField(b, sep, "responseMimeType")
		b = appendStdString(b, gc.ResponseMimeType)
	}
	if tc := gc.ThinkingConfig; tc != nil {
		b, _ = appendField(b, sep, "thinkingConfig")
		b = append(b, '{')
		if tc.ThinkingBudget != nil {
			b = strconv.AppendInt(append(b, `"thinkingBudget":`...), int64(*tc.ThinkingBudget), 10)
		}
		if tc.IncludeThoughts {
			if tc.ThinkingBudget != nil {
				b = append(b, ',')
			}
			b = append(b, `"includeThoughts":true`...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendField writes an object member's name, after a comma when sep.
func appendField(b []byte, sep bool, name string) ([]byte, bool) {
	if sep {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':'), true
}

// appendStdString appends s as encoding/json writes it with HTML
// escaping off (wire.PostJSON's encoder).
func appendStdString(b []byte, s string) []byte { return jsonenc.AppendString(b, s, false) }

// postHeader is the header wire.PostJSON gives a request, its two values
// in one array (each slice capped at its value, so an Add elsewhere
// copies rather than writes over the other).
func postHeader(stream bool, extra map[string]string) http.Header {
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	vals := []string{"application/json", accept}
	h := make(http.Header, len(extra)+2)
	h["Content-Type"] = vals[0:1:1]
	h["Accept"] = vals[1:2:2]
	for k, v := range extra {
		h.Set(k, v)
	}
	return h
}

// postRequest is wire.PostJSON(path, out, stream, extra), through the
// append encoder when it takes out.
func postRequest(path string, out *generateRequest, stream bool, extra map[string]string) (*wire.Request, error) {
	if body, ok := appendRequest(out); ok {
		return &wire.Request{Method: http.MethodPost, Path: path, Body: body, Header: postHeader(stream, extra)}, nil
	}
	return wire.PostJSON(path, out, stream, extra)
}
