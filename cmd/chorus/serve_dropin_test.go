package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestServeOfficialSDKsDropIn runs the official openai and
// @anthropic-ai/sdk npm packages against "chorus serve" as an application
// that only changed its base URL: their own model names (gpt-4o-mini,
// claude-sonnet-4-5) reach provider openai and provider anthropic (fakes
// of their formats, whose base URLs the environment moves), buffered,
// streamed and with tools; the answers name the model as asked; and the
// Anthropic client's cache_control on its system prompt comes back as
// cache_read_input_tokens on its second call.
func TestServeOfficialSDKsDropIn(t *testing.T) {
	root, sdk := npmSDKs(t)
	up := llmtest.NewServer(llmtest.WithPromptCache())
	defer up.Close()
	up.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		if bytes.Contains(r.Body, []byte(`"get_weather"`)) && !bytes.Contains(r.Body, []byte(`"tool_result"`)) {
			return llmtest.ToolCalls(llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`})
		}
		return llmtest.Text("hello from " + string(r.Format) + " " + r.Model)
	})
	vars := map[string]string{
		"OPENAI_API_KEY": "sk-oa-SECRET-dropin", "OPENAI_BASE_URL": up.OpenAIBaseURL(),
		"ANTHROPIC_API_KEY": "sk-ant-SECRET-dropin", "ANTHROPIC_BASE_URL": up.AnthropicBaseURL(),
	}
	base, stop := startServe(t, vars, "--addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "gateway", "testdata", "sdk", "dropin.cjs"), base, "unused-on-loopback")
	cmd.Env = append(os.Environ(), "SDK_DIR="+sdk)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	exit, serveErr := stop()
	if runErr != nil {
		t.Fatalf("node dropin.cjs: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", runErr, stdout.String(), stderr.String(), serveErr)
	}
	if exit != 0 || strings.Contains(serveErr+stdout.String(), "SECRET") {
		t.Errorf("serve exit %d, stderr %s", exit, serveErr)
	}
	out := nodeCases(&stdout)
	want := func(name, key string, v any) {
		t.Helper()
		if got := out[name][key]; got != v {
			t.Errorf("%s: %s = %#v, want %#v (line %v)", name, key, got, v, out[name])
		}
	}
	want("openai_buffered", "text", "hello from openai gpt-4o-mini")
	want("openai_buffered", "model", "gpt-4o-mini")
	want("openai_stream", "text", "hello from openai gpt-4o-mini")
	want("openai_tools", "name", "get_weather")
	want("openai_tools", "args", `{"city":"Paris"}`)
	want("anthropic_buffered", "text", "hello from anthropic claude-sonnet-4-5")
	want("anthropic_buffered", "model", "claude-sonnet-4-5")
	want("anthropic_stream", "text", "hello from anthropic claude-sonnet-4-5")
	want("anthropic_tools", "name", "get_weather")
	want("anthropic_tools", "args", `{"city":"Paris"}`)
	w1, _ := out["anthropic_cache_1"]["write"].(float64)
	if w1 < 1000 || out["anthropic_cache_1"]["read"] != 0.0 {
		t.Errorf("first cached call: %v", out["anthropic_cache_1"])
	}
	want("anthropic_cache_2", "read", w1)
	want("anthropic_cache_2", "write", 0.0)
	for _, r := range up.Requests() {
		if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), "SECRET-dropin") {
			t.Errorf("a request reached the fake without the provider's key: %s %s", r.Format, r.Path)
		}
	}
}
