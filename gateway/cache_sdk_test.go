package gateway_test

import (
	"reflect"
	"testing"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestCacheNodeSDKs: the official openai (buffered and streamed) and
// @anthropic-ai/sdk (streamed) npm packages ask each question twice; the
// second answer comes from the cache (x-chorus-cache: hit, nothing sent
// upstream) and the SDK makes the same of it as of the provider's: text,
// tool calls, finish and usage.
func TestCacheNodeSDKs(t *testing.T) {
	sdkDir(t)
	f := newFixture(t, gateway.Options{Keys: []gateway.Key{{Name: "sdk", SHA256: gateway.HashKey("gk-sdk-good")}}}, cacheOpt(t))
	f.up.Push(
		llmtest.Respond(llmtest.Reply{Text: "checking", ToolCalls: []llm.ToolCall{{ID: "call_p", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 9}}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one, ", "two, ", "three"}, Usage: &llm.Usage{PromptTokens: 8, CompletionTokens: 3}}),
		llmtest.Respond(llmtest.Reply{Text: "let me look", ToolCalls: []llm.ToolCall{{ID: "toolu_r", Name: "get_weather", Arguments: `{"city":"Rome"}`}}, Usage: &llm.Usage{PromptTokens: 30, CompletionTokens: 12}}),
	)
	out := runNode(t, "cache.cjs", f.url, "gk-sdk-good")
	t.Logf("SDK output: %v", out)
	for _, c := range []string{"openai-buffered", "openai-stream", "anthropic-stream"} {
		first, second := out[c+"-1"], out[c+"-2"]
		if first == nil || second == nil {
			t.Fatalf("%s: no output: %v", c, out)
		}
		if first["cache"] != "miss" || second["cache"] != "hit" {
			t.Errorf("%s: x-chorus-cache %v then %v, want miss then hit", c, first["cache"], second["cache"])
		}
		delete(first, "cache")
		delete(second, "cache")
		delete(first, "case")
		delete(second, "case")
		if !reflect.DeepEqual(first, second) {
			t.Errorf("%s: from the cache\n%v\nfrom the provider\n%v", c, second, first)
		}
		if first["text"] == "" || first["usage"] == nil {
			t.Errorf("%s: the provider's answer is empty: %v", c, first)
		}
	}
	if len(out["openai-buffered-1"]["tools"].([]any)) != 1 || len(out["anthropic-stream-1"]["tools"].([]any)) != 1 {
		t.Errorf("tool calls missing: %v", out)
	}
	if f.up.Count() != 3 {
		t.Errorf("upstream requests = %d, want 3 (one per question)", f.up.Count())
	}
}
