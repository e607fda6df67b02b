package cache

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// keyed lists the fields that are part of the key. Together with excluded
// it must name every field of every type a ChatRequest holds.
var keyed = []string{
	"ChatRequest.Messages", "ChatRequest.Tools", "ChatRequest.ToolChoice", "ChatRequest.ParallelToolCalls",
	"ChatRequest.ResponseFormat", "ChatRequest.Reasoning", "ChatRequest.MaxTokens", "ChatRequest.Temperature",
	"ChatRequest.TopP", "ChatRequest.Stop", "ChatRequest.Seed", "ChatRequest.Cache", "ChatRequest.TopK",
	"ChatRequest.FrequencyPenalty", "ChatRequest.PresencePenalty", "ChatRequest.LogitBias", "ChatRequest.Logprobs",
	"ChatRequest.Verbosity", "ChatRequest.Safety", "ChatRequest.Include", "ChatRequest.Truncation",
	"ChatRequest.Extra", "ChatRequest.OnUnsupported", "ChatRequest.PreferResponses",
	"Message.Role", "Message.Content", "Message.Parts", "Message.ToolCalls", "Message.Reasoning",
	"Message.ThinkingBlocks", "Message.Refusal", "Message.ToolCallID", "Message.ToolName", "Message.IsError",
	"Part.Type", "Part.Text", "Part.MIMEType", "Part.Data", "Part.URL",
	"ToolCall.ID", "ToolCall.Name", "ToolCall.Arguments", "ToolCall.Signature",
	"ThinkingBlock.Format", "ThinkingBlock.Text", "ThinkingBlock.Signature", "ThinkingBlock.Redacted",
	"ThinkingBlock.Data", "ThinkingBlock.ID",
	"Tool.Name", "Tool.Description", "Tool.Parameters", "Tool.Strict",
	"ToolChoice.Mode", "ToolChoice.Name",
	"ResponseFormat.Type", "ResponseFormat.Name", "ResponseFormat.Schema", "ResponseFormat.Strict",
	"Reasoning.Effort", "Reasoning.BudgetTokens", "Reasoning.IncludeThoughts", "Reasoning.Summary",
	"PromptCache.CachedContent", "Logprobs.TopLogprobs",
	"SafetySetting.Category", "SafetySetting.Threshold", "SafetySetting.Method",
	"Extra.Format", "Extra.Fields", "RawField.Name", "RawField.Value",
	"CacheMark.TTL",
}

// TestEveryFieldClassified fails when a type reachable from
// llm.ChatRequest has a field neither keyed nor excluded: a new field
// must be classified (rule 1).
func TestEveryFieldClassified(t *testing.T) {
	known := map[string]bool{}
	for _, f := range keyed {
		known[f] = true
	}
	for f := range excluded {
		if known[f] {
			t.Errorf("%s is both keyed and excluded", f)
		}
		known[f] = true
	}
	seen := map[reflect.Type]bool{}
	var missing []string
	found := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := t.Name() + "." + f.Name
			found[name] = true
			if !known[name] {
				missing = append(missing, name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[llm.ChatRequest]())
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("fields neither keyed nor excluded (add each to keyed in this test, or to excluded in key.go with its reason): %s", strings.Join(missing, ", "))
	}
	for f := range known {
		if !found[f] {
			t.Errorf("%s is classified but no longer exists", f)
		}
	}
}

func base() *llm.ChatRequest {
	return &llm.ChatRequest{
		Model:    "ignored",
		Messages: []llm.Message{llm.SystemText("be brief"), llm.UserText("hello")},
	}
}

func same(t *testing.T, a, b *llm.ChatRequest) {
	t.Helper()
	if Key("openai/gpt-4o", a) != Key("openai/gpt-4o", b) {
		t.Fatalf("different keys, want one entry:\n%s\n%s", Canonical("openai/gpt-4o", a), Canonical("openai/gpt-4o", b))
	}
}

func differ(t *testing.T, a, b *llm.ChatRequest) {
	t.Helper()
	if Key("openai/gpt-4o", a) == Key("openai/gpt-4o", b) {
		t.Fatalf("same key, want two entries:\n%s", Canonical("openai/gpt-4o", a))
	}
}

// TestRuleTarget: the target, not the request's Model, is keyed.
func TestRuleTarget(t *testing.T) {
	a, b := base(), base()
	b.Model = "an-alias"
	same(t, a, b)
	if Key("openai/gpt-4o", a) == Key("openai/gpt-4o-mini", a) {
		t.Fatal("two models share a key")
	}
	if Key("openai/gpt-4o", a) == Key("azure/gpt-4o", a) {
		t.Fatal("two providers share a key")
	}
}

// TestRule1Excluded: each excluded field leaves the key as it is; each
// keyed field changes it.
func TestRule1Excluded(t *testing.T) {
	for name, set := range map[string]func(*llm.ChatRequest){
		"Headers":          func(r *llm.ChatRequest) { r.Headers = map[string]string{"x-request-id": "abc"} },
		"Metadata":         func(r *llm.ChatRequest) { r.Metadata = map[string]string{"run": "7"} },
		"User":             func(r *llm.ChatRequest) { r.User = "u-1" },
		"SafetyIdentifier": func(r *llm.ChatRequest) { r.SafetyIdentifier = "s-1" },
		"Store":            func(r *llm.ChatRequest) { r.Store = llm.Ptr(true) },
		"ServiceTier":      func(r *llm.ChatRequest) { r.ServiceTier = "flex" },
		"PromptCache.Key":  func(r *llm.ChatRequest) { r.Cache = &llm.PromptCache{Key: "k", Retention: "24h"} },
		"Message.Cache":    func(r *llm.ChatRequest) { r.Messages[0].Cache = &llm.CacheMark{TTL: llm.CacheTTL1h} },
	} {
		t.Run(name, func(t *testing.T) {
			r := base()
			set(r)
			same(t, base(), r)
		})
	}
}

func TestRule1Keyed(t *testing.T) {
	for name, set := range map[string]func(*llm.ChatRequest){
		"message text":      func(r *llm.ChatRequest) { r.Messages[1].Content = "hello!" },
		"role":              func(r *llm.ChatRequest) { r.Messages[0].Role = llm.RoleDeveloper },
		"tools":             func(r *llm.ChatRequest) { r.Tools = []llm.Tool{{Name: "f"}} },
		"tool choice":       func(r *llm.ChatRequest) { r.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceRequired} },
		"parallel":          func(r *llm.ChatRequest) { r.ParallelToolCalls = llm.Ptr(false) },
		"response format":   func(r *llm.ChatRequest) { r.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONObject} },
		"reasoning":         func(r *llm.ChatRequest) { r.Reasoning = &llm.Reasoning{Effort: llm.EffortLow} },
		"max tokens":        func(r *llm.ChatRequest) { r.MaxTokens = 10 },
		"temperature":       func(r *llm.ChatRequest) { r.Temperature = llm.Ptr(0.5) },
		"top p":             func(r *llm.ChatRequest) { r.TopP = llm.Ptr(0.9) },
		"stop":              func(r *llm.ChatRequest) { r.Stop = []string{"\n"} },
		"seed":              func(r *llm.ChatRequest) { r.Seed = llm.Ptr[int64](7) },
		"top k":             func(r *llm.ChatRequest) { r.TopK = llm.Ptr(3) },
		"frequency penalty": func(r *llm.ChatRequest) { r.FrequencyPenalty = llm.Ptr(0.1) },
		"presence penalty":  func(r *llm.ChatRequest) { r.PresencePenalty = llm.Ptr(0.1) },
		"logit bias":        func(r *llm.ChatRequest) { r.LogitBias = map[string]int{"50256": -100} },
		"logprobs":          func(r *llm.ChatRequest) { r.Logprobs = &llm.Logprobs{TopLogprobs: 2} },
		"verbosity":         func(r *llm.ChatRequest) { r.Verbosity = "low" },
		"safety":            func(r *llm.ChatRequest) { r.Safety = []llm.SafetySetting{{Category: "c", Threshold: "BLOCK_NONE"}} },
		"include":           func(r *llm.ChatRequest) { r.Include = []string{"reasoning.encrypted_content"} },
		"truncation":        func(r *llm.ChatRequest) { r.Truncation = "auto" },
		"cached content":    func(r *llm.ChatRequest) { r.Cache = &llm.PromptCache{CachedContent: "cachedContents/1"} },
		"extra": func(r *llm.ChatRequest) {
			r.Extra = &llm.Extra{Format: "openai", Fields: []llm.RawField{{Name: "n", Value: json.RawMessage(`2`)}}}
		},
		"on unsupported":   func(r *llm.ChatRequest) { r.OnUnsupported = llm.DropUnsupported },
		"prefer responses": func(r *llm.ChatRequest) { r.PreferResponses = true },
		"tool call id":     func(r *llm.ChatRequest) { r.Messages[1].ToolCallID = "c1" },
		"thinking":         func(r *llm.ChatRequest) { r.Messages[1].ThinkingBlocks = []llm.ThinkingBlock{{Signature: "s"}} },
	} {
		t.Run(name, func(t *testing.T) {
			r := base()
			set(r)
			differ(t, base(), r)
		})
	}
}

// TestRule2Zero: an empty slice is an unset one, and so is a pointer to
// a struct with nothing keyed set; a pointer to a zero number is not.
func TestRule2Zero(t *testing.T) {
	a, b := base(), base()
	b.Stop, b.Tools, b.LogitBias = []string{}, []llm.Tool{}, map[string]int{}
	same(t, a, b)
	c := base()
	c.Temperature = llm.Ptr(0.0)
	differ(t, a, c)
	d := base()
	d.Reasoning = &llm.Reasoning{}
	same(t, a, d)
	d.Reasoning.Effort = llm.EffortLow
	differ(t, a, d)
}

// TestRule3Order: the order of messages and stop sequences is kept.
func TestRule3Order(t *testing.T) {
	a, b := base(), base()
	b.Messages[0], b.Messages[1] = b.Messages[1], b.Messages[0]
	differ(t, a, b)
	c, d := base(), base()
	c.Stop, d.Stop = []string{"a", "b"}, []string{"b", "a"}
	differ(t, c, d)
}

// TestRule4Maps: map keys are sorted, whatever order they were set in.
func TestRule4Maps(t *testing.T) {
	a, b := base(), base()
	a.LogitBias = map[string]int{}
	b.LogitBias = map[string]int{}
	for i := range 50 {
		a.LogitBias[string(rune('a'+i%26))+string(rune('0'+i/26))] = i
	}
	for i := 49; i >= 0; i-- {
		b.LogitBias[string(rune('a'+i%26))+string(rune('0'+i/26))] = i
	}
	same(t, a, b)
	b.LogitBias["a0"] = 1
	differ(t, a, b)
}

// TestRule5RawJSON: tool schemas, response schemas and Extra values are
// keyed by their JSON, not their spelling.
func TestRule5RawJSON(t *testing.T) {
	tool := func(schema string) *llm.ChatRequest {
		r := base()
		r.Tools = []llm.Tool{{Name: "f", Parameters: json.RawMessage(schema)}}
		return r
	}
	same(t, tool(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`),
		tool("{\n  \"properties\": {\"b\": {\"type\": \"integer\"}, \"a\": {\"type\":\"string\"}},\n  \"type\": \"object\"\n}"))
	differ(t, tool(`{"type":"object","required":["a","b"]}`), tool(`{"type":"object","required":["b","a"]}`))
	differ(t, tool(`{"maximum":1}`), tool(`{"maximum":1.0}`))
	differ(t, tool(`{"a":"x"}`), tool(`{"a":"y"}`))
	differ(t, tool(`not json`), tool(`not  json`))
	schema := func(s string) *llm.ChatRequest {
		r := base()
		r.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "x", Schema: json.RawMessage(s)}
		return r
	}
	same(t, schema(`{"a":1,"b":2}`), schema(`{ "b":2, "a":1 }`))
	extra := func(v string) *llm.ChatRequest {
		r := base()
		r.Extra = &llm.Extra{Format: "openai", Fields: []llm.RawField{{Name: "prediction", Value: json.RawMessage(v)}}}
		return r
	}
	same(t, extra(`{"type":"content","content":"x"}`), extra(`{"content": "x", "type": "content"}`))
	differ(t, extra(`{"type":"content","content":"x"}`), extra(`{"type":"content","content":"z"}`))
}

// TestRule6ExtraSet: Extra's fields are a set by name; the format counts.
func TestRule6ExtraSet(t *testing.T) {
	extra := func(format string, fs ...llm.RawField) *llm.ChatRequest {
		r := base()
		r.Extra = &llm.Extra{Format: format, Fields: fs}
		return r
	}
	x := llm.RawField{Name: "x", Value: json.RawMessage(`1`)}
	y := llm.RawField{Name: "y", Value: json.RawMessage(`true`)}
	same(t, extra("openai", x, y), extra("openai", y, x))
	differ(t, extra("openai", x, y), extra("anthropic", x, y))
	differ(t, extra("openai", x), extra("openai", x, y))
}

// TestRule7Bytes: inline data is keyed by its hash; the key holds no
// content.
func TestRule7Bytes(t *testing.T) {
	img := func(data []byte) *llm.ChatRequest {
		r := base()
		r.Messages[1].Parts = []llm.Part{llm.ImagePart("image/png", data)}
		return r
	}
	secret := []byte("PNG-bytes-that-must-not-appear-in-the-key")
	same(t, img(secret), img(append([]byte(nil), secret...)))
	differ(t, img(secret), img([]byte("other bytes")))
	if c := Canonical("p/m", img(secret)); strings.Contains(string(c), "must-not-appear") {
		t.Fatalf("canonical form holds the image bytes: %s", c)
	}
	u := func(url string) *llm.ChatRequest {
		r := base()
		r.Messages[1].Parts = []llm.Part{llm.ImageURLPart(url)}
		return r
	}
	differ(t, u("https://x/a.png"), u("https://x/b.png"))
	doc := base()
	doc.Messages[1].Parts = []llm.Part{llm.DocumentPart(secret)}
	differ(t, img(secret), doc)
}
