package gemini

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Honours says which optional fields the generateContent format sends:
// topK, the penalties, logprobs (responseLogprobs and logprobs), safety
// settings and a cached-content handle. It has no logit bias, service
// tier, verbosity or stored completions, and no place for an end user's
// id or OpenAI's metadata (dropped, named in x-chorus-dropped); it caches
// prompt prefixes on its own, so cache breakpoints are dropped too.
func (Codec) Honours(wire.BuildOptions) llm.Honours {
	return llm.Honours{Format: formatName, TopK: true, FrequencyPenalty: true, PresencePenalty: true, Logprobs: true, Safety: true, CachedContent: true}
}

// optionalFields sets the request's optional fields on out and gc (made
// when nil).
func optionalFields(out *generateRequest, gc *generationConfig, req *llm.ChatRequest) *generationConfig {
	for _, s := range req.Safety {
		out.SafetySettings = append(out.SafetySettings, safetySetting{Category: s.Category, Threshold: s.Threshold, Method: s.Method})
	}
	if req.TopK == nil && req.FrequencyPenalty == nil && req.PresencePenalty == nil && req.Logprobs == nil {
		return gc
	}
	if gc == nil {
		gc = &generationConfig{}
	}
	gc.TopK, gc.FrequencyPenalty, gc.PresencePenalty = req.TopK, req.FrequencyPenalty, req.PresencePenalty
	if lp := req.Logprobs; lp != nil {
		gc.ResponseLogprobs = true
		if lp.TopLogprobs > 0 {
			n := lp.TopLogprobs
			gc.Logprobs = &n
		}
	}
	return gc
}

// spliceExtra adds a Gemini client's own fields to the body: top-level
// ones as they came, "generationConfig.<name>" ones inside
// generationConfig (made when the body has none).
func spliceExtra(body []byte, e *llm.Extra) []byte {
	if e == nil || e.Format != formatName {
		return body
	}
	var top, inGC []llm.RawField
	for _, f := range e.Fields {
		if name, ok := strings.CutPrefix(f.Name, "generationConfig."); ok {
			inGC = append(inGC, llm.RawField{Name: name, Value: f.Value})
		} else {
			top = append(top, f)
		}
	}
	if len(inGC) > 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			gc := map[string]json.RawMessage{}
			if raw := bytes.TrimSpace(m["generationConfig"]); len(raw) > 0 {
				_ = json.Unmarshal(raw, &gc)
			}
			for _, f := range inGC {
				gc[f.Name] = f.Value // the client's own value wins
			}
			if b, err := json.Marshal(gc); err == nil {
				m["generationConfig"] = b
			}
			if b, err := json.Marshal(m); err == nil {
				body = b
			}
		}
	}
	return wire.SpliceExtra(body, &llm.Extra{Format: formatName, Fields: top}, formatName)
}
