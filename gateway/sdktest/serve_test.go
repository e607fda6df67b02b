package sdktest

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/sim"
)

// startChorusServe builds the chorus command from this checkout and runs
// "chorus serve" on a loopback port with cfg, with only the environment
// given (no provider key of the machine's); it returns the base URL once
// the command printed that it listens. The process is stopped (SIGINT,
// then killed) and reaped when the test ends.
func startChorusServe(t *testing.T, cfg string, env ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chorus")
	gobin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	build := exec.Command(gobin, "build", "-o", bin, "./cmd/chorus")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building chorus: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--config", cfg)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				lines <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if strings.Contains(stderr.String(), "SECRET") {
			t.Errorf("a provider key in chorus serve's stderr: %s", stderr.String())
		}
	})
	select {
	case u := <-lines:
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("chorus serve printed no listening line in 60s (its stderr is checked at cleanup)")
	}
	return ""
}

// TestGoSDKsAgainstChorusServe runs openai-go, anthropic-sdk-go and genai
// against the chorus command itself ("chorus serve") on the simulator:
// provider sim (OpenAI format), and the built-in anthropic and gemini
// providers moved onto a second simulator (their own formats). Each SDK:
// buffered and streamed chat across formats, tools, embeddings (OpenAI and
// Gemini), the model list, a provider's 400, an auth error and the gateway
// key's 429 as its own error type.
func TestGoSDKsAgainstChorusServe(t *testing.T) {
	up, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	const yml = `gateway:
  keys:
    - {name: good, key_env: GK_GOOD}
    - {name: limited, key_env: GK_LIMITED, rpm: 1}
`
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startChorusServe(t, cfg, "GK_GOOD=gk-serve-good", "GK_LIMITED=gk-serve-limited",
		"ANTHROPIC_API_KEY=sk-ant-SECRET", "ANTHROPIC_BASE_URL="+up.AnthropicBaseURL(),
		"GEMINI_API_KEY=gm-SECRET", "GEMINI_BASE_URL="+up.GeminiBaseURL())
	ctx := t.Context()
	tr := newTransport(t)
	weather := "call get_weather {\"city\":\"Paris\"}"
	want := `get_weather {"city":"Paris"}`

	// openai-go: a Gemini-format model streamed, tools on an Anthropic-format one.
	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("gk-serve-good"), option.WithMaxRetries(0), option.WithHTTPClient(tr))
	r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || r.Choices[0].Message.Content != "[simulated] hi" {
		t.Fatalf("openai buffered: %v %+v", err, r)
	}
	s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gemini/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil || acc.Choices[0].Message.Content != "[simulated] hi" {
		t.Fatalf("openai stream of a Gemini-format model: %v %+v", s.Err(), acc.ChatCompletion)
	}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	s = oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "anthropic/story", Tools: tools, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(weather)}})
	acc = openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if tc := acc.Choices[0].Message.ToolCalls; s.Err() != nil || len(tc) != 1 || tc[0].Function.Name+" "+tc[0].Function.Arguments != want {
		t.Fatalf("openai tools on an Anthropic-format model: %v %+v", s.Err(), acc.ChatCompletion)
	}
	e, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "sim/embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	if err != nil || len(e.Data) != 2 || len(e.Data[0].Embedding) == 0 {
		t.Fatalf("openai embeddings: %v %+v", err, e)
	}
	page, err := oc.Models.List(ctx)
	if err != nil || len(page.Data) < 3 {
		t.Fatalf("openai models: %v %+v", err, page)
	}
	var oe *openai.Error
	if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[sim:status=400]")}}); !errors.As(err, &oe) || oe.StatusCode != 400 {
		t.Fatalf("openai 400: %v", err)
	}
	bad := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("gk-wrong"), option.WithMaxRetries(0), option.WithHTTPClient(tr))
	if _, err := bad.Models.List(ctx); !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Fatalf("openai auth: %v", err)
	}
	lim := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("gk-serve-limited"), option.WithMaxRetries(0), option.WithHTTPClient(tr))
	_, _ = lim.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	if _, err := lim.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}); !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Response.Header.Get("retry-after") == "" {
		t.Fatalf("openai 429: %v", err)
	}

	// anthropic-sdk-go: the OpenAI-format simulator streamed, with tools.
	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("gk-serve-good"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(tr))
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(weather))}
	as := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "sim/story", MaxTokens: 200, Messages: msgs,
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}})
	msg := anthropic.Message{}
	for as.Next() {
		if err := msg.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if as.Err() != nil || len(msg.Content) == 0 || msg.StopReason != "tool_use" {
		t.Fatalf("anthropic stream with tools: %v %+v", as.Err(), msg)
	}
	if tu := msg.Content[len(msg.Content)-1]; tu.Type != "tool_use" || tu.Name+" "+string(tu.Input) != want {
		t.Fatalf("anthropic tool call %+v", tu)
	}
	var ids []string
	pager := ac.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if pager.Err() != nil || len(ids) != len(page.Data) {
		t.Fatalf("anthropic models: %v %v (OpenAI's list has %d)", pager.Err(), ids, len(page.Data))
	}
	var ae *anthropic.Error
	if _, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim/echo", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[sim:status=400]"))}}); !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Fatalf("anthropic 400: %v", err)
	}
	alim := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("gk-serve-limited"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(tr))
	if _, err := alim.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim/echo", MaxTokens: 10, Messages: msgs}); !errors.As(err, &ae) || ae.StatusCode != 429 {
		t.Fatalf("anthropic 429: %v", err)
	}

	// genai: an OpenAI-format model and an Anthropic-format one streamed, embeddings, the list.
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "gk-serve-good", Backend: genai.BackendGeminiAPI, HTTPClient: tr, HTTPOptions: genai.HTTPOptions{BaseURL: base}})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"sim/echo", "anthropic/echo"} {
		text := ""
		for chunk, err := range gc.Models.GenerateContentStream(ctx, model, genai.Text("hi"), nil) {
			if err != nil {
				t.Fatalf("genai stream %s: %v", model, err)
			}
			text += chunk.Text()
		}
		if text != "[simulated] hi" {
			t.Fatalf("genai stream %s: %q", model, text)
		}
	}
	ge, err := gc.Models.EmbedContent(ctx, "sim/embed", genai.Text("a"), nil)
	if err != nil || len(ge.Embeddings) != 1 || len(ge.Embeddings[0].Values) == 0 {
		t.Fatalf("genai embeddings: %v %+v", err, ge)
	}
	n := 0
	for _, err := range gc.Models.All(ctx) {
		if err != nil {
			t.Fatalf("genai models: %v", err)
		}
		n++
	}
	if n != len(page.Data) {
		t.Fatalf("genai lists %d models, OpenAI's list %d", n, len(page.Data))
	}
	var gerr genai.APIError
	if _, err := gc.Models.GenerateContent(ctx, "sim/echo", genai.Text("[sim:status=400]"), nil); !errors.As(err, &gerr) || gerr.Code != 400 {
		t.Fatalf("genai 400: %v", err)
	}
}

// newTransport is an HTTP client whose idle connections close when the
// test ends (no keep-alive loop left for goleak).
func newTransport(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestGoSDKsDropInAgainstChorusServe: the three Go SDKs, given only the
// base URL of "chorus serve", call their providers' own model names
// (gpt-4o-mini, claude-sonnet-4-5, gemini-2.5-flash), buffered and
// streamed, and each reaches the fake of its own format (the environment
// moves the built-in providers' base URLs onto it) under that name.
func TestGoSDKsDropInAgainstChorusServe(t *testing.T) {
	up := llmtest.NewServer()
	defer up.Close()
	up.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		return llmtest.Deltas("hello ", string(r.Format)+" "+r.Model)
	})
	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	if err := os.WriteFile(cfg, []byte("gateway:\n  keys:\n    - {name: good, key_env: GK_GOOD}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startChorusServe(t, cfg, "GK_GOOD=gk-dropin",
		"OPENAI_API_KEY=sk-oa-SECRET", "OPENAI_BASE_URL="+up.OpenAIBaseURL(),
		"ANTHROPIC_API_KEY=sk-ant-SECRET", "ANTHROPIC_BASE_URL="+up.AnthropicBaseURL(),
		"GEMINI_API_KEY=gm-SECRET", "GEMINI_BASE_URL="+up.GeminiBaseURL())
	ctx := t.Context()
	tr := newTransport(t)

	oc := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("gk-dropin"), option.WithMaxRetries(0), option.WithHTTPClient(tr))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs})
	if err != nil || r.Choices[0].Message.Content != "hello openai gpt-4o-mini" || r.Model != "gpt-4o-mini" {
		t.Fatalf("openai buffered: %v %+v", err, r)
	}
	s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs})
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil || acc.Choices[0].Message.Content != "hello openai gpt-4o-mini" {
		t.Fatalf("openai streamed: %v %+v", s.Err(), acc.ChatCompletion)
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("gk-dropin"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(tr))
	am := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 50, Messages: am})
	if err != nil || m.Content[0].Text != "hello anthropic claude-sonnet-4-5" || string(m.Model) != "claude-sonnet-4-5" {
		t.Fatalf("anthropic buffered: %v %+v", err, m)
	}
	as := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 50, Messages: am})
	msg := anthropic.Message{}
	for as.Next() {
		if err := msg.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if as.Err() != nil || msg.Content[0].Text != "hello anthropic claude-sonnet-4-5" {
		t.Fatalf("anthropic streamed: %v %+v", as.Err(), msg)
	}

	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "gk-dropin", Backend: genai.BackendGeminiAPI, HTTPClient: tr, HTTPOptions: genai.HTTPOptions{BaseURL: base}})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := gc.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil)
	if err != nil || gr.Text() != "hello gemini gemini-2.5-flash" {
		t.Fatalf("gemini buffered: %v %+v", err, gr)
	}
	text := ""
	for chunk, err := range gc.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("gemini streamed: %v", err)
		}
		text += chunk.Text()
	}
	if text != "hello gemini gemini-2.5-flash" {
		t.Fatalf("gemini streamed text %q", text)
	}
}
