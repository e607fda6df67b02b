package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// sdkDir is where make sdk-clients installs the pinned npm SDKs
// (testdata/npm) for these tests.
func sdkDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", ".cache", "npm-sdk")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		if os.Getenv("CHORUS_REQUIRE_SDK") != "" || os.Getenv("CI") != "" {
			t.Fatalf("the official SDKs are not installed (run make sdk-clients): %v %v", err, nodeErr)
		}
		t.Skip("the official SDKs are not installed: run make sdk-clients (make test does)")
	}
	return dir
}

// runNode runs one SDK script and returns its output lines by case. The
// process is killed when the test's budget ends, and waited for: no node
// process outlives the test.
func runNode(t *testing.T, script string, args ...string) map[string]map[string]any {
	t.Helper()
	dir := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join("testdata", "sdk", script)}, args...)...)
	cmd.Env = append(os.Environ(), "SDK_DIR="+dir)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out[m["case"].(string)] = m
		}
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return out
}

func sdkKeys() gateway.Options {
	return gateway.Options{Keys: []gateway.Key{
		{Name: "sdk", SHA256: gateway.HashKey("gk-sdk-good")},
		{Name: "sdk-limited", SHA256: gateway.HashKey("gk-sdk-limited"), RPM: 1},
	}}
}

func expect(t *testing.T, out map[string]map[string]any, name string, want map[string]any) {
	t.Helper()
	got, ok := out[name]
	if !ok {
		t.Errorf("%s: no output", name)
		return
	}
	for k, v := range want {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(v) {
			t.Errorf("%s: %s = %s, want %s (whole line: %v)", name, k, g, mustJSON(v), got)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOpenAINodeSDK drives the gateway with the official openai npm
// package: buffered and streamed chat, tools, a mid-stream failure,
// cancellation, embeddings, the model list, an auth error and a 429.
func TestOpenAINodeSDK(t *testing.T) {
	f := newFixture(t, sdkKeys())
	call := llm.ToolCall{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(
		llmtest.Text("hello from the gateway"),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one ", "two"}, Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 2}}),
		llmtest.ToolCalls(call),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 5 * time.Minute, Reply: &llmtest.Reply{Deltas: []string{"first", "never"}}}),
	)
	out := runNode(t, "openai.cjs", f.url, "gk-sdk-good", "gk-sdk-limited")
	expect(t, out, "buffered", map[string]any{"text": "hello from the gateway", "finish": "stop"})
	expect(t, out, "stream", map[string]any{"text": "one two", "finish": "stop", "total": 6})
	expect(t, out, "tools", map[string]any{"id": "call_w", "name": "get_weather", "args": `{"city":"Paris"}`, "finish": "tool_calls"})
	expect(t, out, "midstream", map[string]any{"text": "ab", "error": "APIError"})
	// openai-node ends an aborted stream's loop quietly or with
	// APIUserAbortError, by version; either way the upstream call must end.
	if c := out["cancel"]; c["text"] != "first" || (c["error"] != nil && c["error"] != "APIUserAbortError") {
		t.Errorf("cancel: %v", c)
	}
	vb := llmtest.EmbeddingFor("b", 8)
	expect(t, out, "embeddings", map[string]any{"n": 2, "first": []float64{float64(vb[0]), float64(vb[1])}})
	expect(t, out, "auth", map[string]any{"error": "AuthenticationError", "status": 401})
	expect(t, out, "ratelimit", map[string]any{"error": "RateLimitError", "status": 429, "remaining": "0", "retryAfter": "60"})
	if ids, _ := out["models"]["ids"].([]any); len(ids) < 2 || ids[0] != "fast" {
		t.Errorf("models: %v", out["models"])
	}
	waitNoneInFlight(t, f)
}

// waitNoneInFlight waits until no runtime call is in flight: a stalled
// upstream answer (a minute long) whose client went away must be cancelled.
func waitNoneInFlight(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		busy := 0
		for _, s := range f.rt.Stats() {
			busy += s.InFlight
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream call(s) outlived their cancelled clients", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnthropicNodeSDK drives the gateway with the official
// @anthropic-ai/sdk npm package: buffered and streamed thinking (each block
// with its signature, streamed as signature_delta), buffered and
// streamed messages, tools streamed from an OpenAI-format model, a
// mid-stream failure, cancellation, count_tokens, an auth error and a 429.
func TestAnthropicNodeSDK(t *testing.T) {
	f := newFixture(t, sdkKeys())
	call := llm.ToolCall{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(
		llmtest.Respond(llmtest.Reply{Text: "hello", Reasoning: "hmm", Signature: "sig-1"}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one ", "two"}, Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 2}}),
		llmtest.Respond(llmtest.Reply{Thinking: []llm.ThinkingBlock{{Text: "first thought", Signature: "sig-A"}, {Text: "second thought", Signature: "sig-B"}}, Text: "done"}),
		llmtest.ToolCalls(call),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 5 * time.Minute, Reply: &llmtest.Reply{Deltas: []string{"first", "never"}}}),
	)
	out := runNode(t, "anthropic.cjs", f.url, "gk-sdk-good", "gk-sdk-limited")
	expect(t, out, "thinkingstream", map[string]any{"blocks": []string{"first thought|sig-A", "second thought|sig-B"}, "sigDeltas": 2, "text": "done"})
	expect(t, out, "buffered", map[string]any{"text": "hello", "signature": "sig-1", "stop": "end_turn"})
	expect(t, out, "stream", map[string]any{"text": "one two", "deltas": "one two", "stop": "end_turn", "output": 2})
	expect(t, out, "tools", map[string]any{"id": "call_w", "name": "get_weather", "input": map[string]any{"city": "Paris"}, "stop": "tool_use"})
	if m := out["midstream"]; m["text"] != "ab" || m["error"] == nil {
		t.Errorf("midstream: %v", m)
	}
	if c := out["cancel"]; c["text"] != "first" || (c["error"] != nil && c["error"] != "APIUserAbortError") {
		t.Errorf("cancel: %v", c)
	}
	expect(t, out, "count", map[string]any{"positive": true})
	expect(t, out, "models", map[string]any{"one": "fast"})
	if ids, _ := out["models"]["ids"].([]any); len(ids) < 3 || ids[0] != "fast" || !slices.Contains(ids, any("anthropic/llmtest-model")) {
		t.Errorf("models: %v", out["models"])
	}
	expect(t, out, "auth", map[string]any{"error": "AuthenticationError", "status": 401})
	expect(t, out, "ratelimit", map[string]any{"error": "RateLimitError", "status": 429, "retryAfter": "60"})
	if r := f.up.Requests()[3]; !strings.HasSuffix(r.Path, "/chat/completions") {
		t.Errorf("the tools case reached %s, not the OpenAI-format provider", r.Path)
	}
	waitNoneInFlight(t, f)
}

// TestResponsesNodeSDK drives POST /v1/responses with the official openai
// npm package: client.responses.create buffered and streamed, the
// responses.stream helper on an Anthropic-format model with tools, a
// mid-stream failure and a stateful request refused.
func TestResponsesNodeSDK(t *testing.T) {
	f := newFixture(t, sdkKeys())
	call := llm.ToolCall{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}
	f.up.Push(
		llmtest.Respond(llmtest.Reply{Text: "hello from responses", Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 3}}),
		llmtest.Respond(llmtest.Reply{Deltas: []string{"one ", "two"}, Usage: &llm.Usage{PromptTokens: 4, CompletionTokens: 2}}),
		llmtest.ToolCalls(call),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}),
	)
	out := runNode(t, "responses.cjs", f.url, "gk-sdk-good")
	expect(t, out, "buffered", map[string]any{"text": "hello from responses", "status": "completed", "total": 7, "id": true})
	expect(t, out, "stream", map[string]any{"text": "one two", "status": "completed", "total": 6, "ordered": true})
	expect(t, out, "tools", map[string]any{"id": "call_w", "name": "get_weather", "args": `{"city":"Paris"}`, "status": "completed"})
	expect(t, out, "midstream", map[string]any{"text": "ab", "error": "APIError"})
	expect(t, out, "stateful", map[string]any{"error": "BadRequestError", "status": 400})
	if r := f.up.Requests()[2]; !strings.HasSuffix(r.Path, "/messages") {
		t.Errorf("the tools case reached %s, not the Anthropic-format provider", r.Path)
	}
	waitNoneInFlight(t, f)
}

// TestBatchesNodeSDK drives /v1/files and /v1/batches with the official
// openai npm package: files.create, batches.create, batches.retrieve
// polling, files.content of the output and error files, batches.list,
// batches.cancel, a model the key may not call, another key's file.
func TestBatchesNodeSDK(t *testing.T) {
	opts := sdkKeys()
	opts.Keys[0].Models = []string{"openai/*"}
	opts.Keys[1].RPM = 0
	f := newFixture(t, opts)
	f.up.Push(llmtest.Text("one"), llmtest.Text("two"), llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 5 * time.Minute}))
	out := runNode(t, "batches.cjs", f.url, "gk-sdk-good")
	b := out["batch"]
	texts, _ := b["texts"].([]any)
	if b["file"] != "batch" || b["bytes"] != true || b["created"] != "validating" || b["status"] != "completed" || len(texts) != 2 {
		t.Errorf("batch: %v", b)
	}
	expect(t, out, "batch", map[string]any{"counts": map[string]int{"total": 3, "completed": 2, "failed": 1}, "errors": []string{"c"}, "metadata": map[string]string{"job": "sdk"}})
	if got := mustJSON(texts); got != `["a:one","b:two"]` && got != `["a:two","b:one"]` {
		t.Errorf("batch answers %s", got)
	}
	expect(t, out, "list", map[string]any{"has": true})
	expect(t, out, "refused", map[string]any{"status": "failed", "code": "model_not_allowed", "line": 1})
	expect(t, out, "cancel", map[string]any{"cancelling": true, "status": "cancelled", "completed": 0})
	expect(t, out, "foreign", map[string]any{"error": "NotFoundError", "status": 404})
	waitNoneInFlight(t, f)
}
