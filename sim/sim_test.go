package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a simulator and a runtime over it, both closed at cleanup.
func start(t *testing.T, o sim.Options) (*sim.Simulator, *runtime.Runtime) {
	t.Helper()
	s, err := sim.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.WithProvider(s.Config()))
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.Close(context.Background())
		s.Close()
	})
	return s, rt
}

func user(model, text string) *llm.ChatRequest {
	return &llm.ChatRequest{Model: model, Messages: []llm.Message{llm.UserText(text)}}
}

// TestEchoAndProse: echo repeats the last user message; any other model
// answers deterministic prose; both are marked simulated, buffered and
// streamed alike, with the simulated header on the wire.
func TestEchoAndProse(t *testing.T) {
	s, rt := start(t, sim.Options{})
	ctx := context.Background()

	res, err := rt.Chat(ctx, user("sim/echo", "hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "[simulated] hello there" || res.FinishReason != llm.FinishStop {
		t.Errorf("echo = %q (%s)", res.Content, res.FinishReason)
	}
	st, err := rt.Stream(ctx, user("sim/echo", "hello there"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	deltas := 0
	for ev, err := range st.All() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == llm.EventText {
			b.WriteString(ev.Text)
			deltas++
		}
	}
	if b.String() != res.Content || deltas < 2 {
		t.Errorf("stream = %q in %d deltas, want %q in several", b.String(), deltas, res.Content)
	}

	a1, err := rt.Chat(ctx, user("sim/prose", "Write a haiku about Go"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := rt.Chat(ctx, user("sim/prose", "Write a haiku about Go"))
	a3, _ := rt.Chat(ctx, user("sim/prose", "Write a limerick about Rust"))
	a4, _ := rt.Chat(ctx, user("sim/other", "Write a haiku about Go"))
	if !strings.HasPrefix(a1.Content, "[simulated prose] ") || a1.Content != a2.Content {
		t.Errorf("prose not deterministic or unmarked: %q vs %q", a1.Content, a2.Content)
	}
	if a3.Content == a1.Content || !strings.HasPrefix(a4.Content, "[simulated other] ") || a4.Content == a1.Content {
		t.Errorf("prose does not depend on prompt and model: %q / %q / %q", a1.Content, a3.Content, a4.Content)
	}
	if a1.Usage.CompletionTokens == 0 || a1.Usage.PromptTokens == 0 {
		t.Errorf("usage not reported: %+v", a1.Usage)
	}
	// The header says simulated on every answer.
	resp, err := http.Post(s.OpenAIBaseURL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.Header.Get(sim.Header) != "true" {
		t.Errorf("header %s = %q", sim.Header, resp.Header.Get(sim.Header))
	}
}

// TestMaxTokensCuts: the output cap cuts the text with finish length and
// keeps the marker.
func TestMaxTokensCuts(t *testing.T) {
	_, rt := start(t, sim.Options{})
	req := user("sim/prose", "a long answer please")
	req.MaxTokens = 6
	res, err := rt.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.FinishReason != llm.FinishLength || len(res.Content) > 24 || !strings.HasPrefix(res.Content, sim.Marker) {
		t.Errorf("capped answer %q (%d bytes, %s)", res.Content, len(res.Content), res.FinishReason)
	}
}

// TestStatusDirective: [sim:status=NNN] fails the request with that status.
func TestStatusDirective(t *testing.T) {
	_, rt := start(t, sim.Options{})
	_, err := rt.Chat(context.Background(), user("sim/echo", "please fail [sim:status=400]"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "simulated failure") {
		t.Fatalf("err = %v, want a simulated 400", err)
	}
}

var weatherTools = []llm.Tool{
	{Name: "get_weather", Description: "weather for a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)},
	{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"utc_offset":{"type":"integer"},"precise":{"type":"boolean"}}}`)},
	{Name: "unused", Parameters: json.RawMessage(`{"type":"object"}`)},
}

// formatClients are plain provider clients of each wire format pointed at
// the simulator.
func formatClients(t *testing.T, s *sim.Simulator) map[string]*providers.Client {
	t.Helper()
	out := map[string]*providers.Client{}
	for _, id := range []string{"openai", "anthropic", "gemini"} {
		cfg, _ := providers.Builtin(id)
		switch id {
		case "openai":
			cfg.BaseURL = s.OpenAIBaseURL()
		case "anthropic":
			cfg.BaseURL = s.AnthropicBaseURL()
		case "gemini":
			cfg.BaseURL = s.GeminiBaseURL()
		}
		cfg.APIKey = "sim-key"
		c, err := providers.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		out[id] = c
	}
	return out
}

// TestToolCallsEveryFormat: tools named in the last user message are
// called in the order named, with the JSON object after the name or
// arguments from the schema; tool results end the loop with a text; a
// forced choice calls a tool nobody named; "none" never calls.
func TestToolCallsEveryFormat(t *testing.T) {
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for id, c := range formatClients(t, s) {
		t.Run(id, func(t *testing.T) {
			req := &llm.ChatRequest{Model: "prose", MaxTokens: 200, Tools: weatherTools, Messages: []llm.Message{
				llm.UserText(`First get_time, then get_weather {"city": "Paris"} please.`),
			}}
			for _, stream := range []bool{false, true} {
				var res *llm.ChatResult
				var err error
				if stream {
					var st *llm.Stream
					if st, err = c.Stream(ctx, req); err == nil {
						res, err = st.Result()
					}
				} else {
					res, err = c.Chat(ctx, req)
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.FinishReason != llm.FinishToolCalls || len(res.ToolCalls) != 2 {
					t.Fatalf("stream=%v: finish %s, calls %+v", stream, res.FinishReason, res.ToolCalls)
				}
				if res.ToolCalls[0].Name != "get_time" || res.ToolCalls[1].Name != "get_weather" {
					t.Errorf("calls out of order: %+v", res.ToolCalls)
				}
				if got := res.ToolCalls[1].Arguments; !jsonEqual(got, `{"city":"Paris"}`) {
					t.Errorf("get_weather args = %s", got)
				}
				if got := res.ToolCalls[0].Arguments; !jsonEqual(got, `{"precise":true,"utc_offset":1}`) {
					t.Errorf("get_time args from schema = %s", got)
				}
				if !strings.HasPrefix(res.Content, sim.Marker) {
					t.Errorf("content %q not marked", res.Content)
				}
			}
			res, _ := c.Chat(ctx, req)
			next := *req
			next.Messages = append(append([]llm.Message(nil), req.Messages...), res.Message(),
				llm.ToolResult(res.ToolCalls[0].ID, "12:00", false), llm.ToolResult(res.ToolCalls[1].ID, "sunny", false))
			next.Messages[len(next.Messages)-2].ToolName = "get_time"
			next.Messages[len(next.Messages)-1].ToolName = "get_weather"
			fin, err := c.Chat(ctx, &next)
			if err != nil {
				t.Fatal(err)
			}
			if fin.FinishReason != llm.FinishStop || len(fin.ToolCalls) != 0 ||
				!strings.Contains(fin.Content, "received 2 tool result(s)") || !strings.Contains(fin.Content, "sunny") {
				t.Errorf("after results: %q (%s)", fin.Content, fin.FinishReason)
			}

			forced := &llm.ChatRequest{Model: "prose", MaxTokens: 200, Tools: weatherTools,
				ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "get_weather"},
				Messages:   []llm.Message{llm.UserText("no tool named here")}}
			res, err = c.Chat(ctx, forced)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "get_weather" || !jsonEqual(res.ToolCalls[0].Arguments, `{"city":"simulated","unit":"celsius"}`) {
				t.Errorf("forced: %+v", res.ToolCalls)
			}
			none := *req
			none.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone}
			res, err = c.Chat(ctx, &none)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ToolCalls) != 0 {
				t.Errorf("tool choice none still called %+v", res.ToolCalls)
			}
		})
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestEmbeddingsAndModels: embeddings are llmtest's hash vectors; the
// model list names the simulator's models.
func TestEmbeddingsAndModels(t *testing.T) {
	_, rt := start(t, sim.Options{})
	ctx := context.Background()
	res, err := rt.Embed(ctx, &llm.EmbedRequest{Model: "sim/embed", Inputs: []string{"alpha", "beta", "alpha"}, Dimensions: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != 3 || len(res.Vectors[0]) != 16 {
		t.Fatalf("vectors %d x %d", len(res.Vectors), len(res.Vectors[0]))
	}
	want := llmtest.EmbeddingFor("beta", 16)
	for i := range want {
		if res.Vectors[1][i] != want[i] || res.Vectors[0][i] != res.Vectors[2][i] {
			t.Fatalf("vector mismatch at %d", i)
		}
	}
	models, err := rt.ListModels(ctx, sim.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != len(sim.Models) || models[0].ID != "echo" || !strings.HasPrefix(models[0].DisplayName, "Simulated") {
		t.Errorf("models = %+v", models)
	}
}

// TestTokensPerSecond: an answer of n completion tokens takes about
// n/TokensPerSecond, buffered and streamed.
func TestTokensPerSecond(t *testing.T) {
	_, rt := start(t, sim.Options{TokensPerSecond: 400, Latency: 30 * time.Millisecond})
	ctx := context.Background()
	prompt := strings.Repeat("word ", 40) // ~200 bytes: about 53 tokens echoed
	for _, stream := range []bool{false, true} {
		begin := time.Now()
		var res *llm.ChatResult
		var err error
		if stream {
			var st *llm.Stream
			if st, err = rt.Stream(ctx, user("sim/echo", prompt)); err == nil {
				res, err = st.Result()
			}
		} else {
			res, err = rt.Chat(ctx, user("sim/echo", prompt))
		}
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		want := 30*time.Millisecond + time.Duration(float64(res.Usage.CompletionTokens)/400*float64(time.Second))
		if took < want*8/10 || took > want*4+time.Second {
			t.Errorf("stream=%v: %d tokens took %v, want about %v", stream, res.Usage.CompletionTokens, took, want)
		}
	}
}

// TestRateLimitedBatchFewRetries: against a simulator admitting 15
// requests per 500ms window, 60 concurrent requests through the runtime
// all succeed, paced by the credential actor, with few 429s.
func TestRateLimitedBatchFewRetries(t *testing.T) {
	s, rt := start(t, sim.Options{RPM: 15, Window: 500 * time.Millisecond})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	begin := time.Now()
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := rt.Chat(ctx, user("sim/echo", strings.Repeat("x", i+1)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(begin)
	if took < 1400*time.Millisecond {
		t.Errorf("60 requests at 15 per 500ms took %v: the limit was not enforced", took)
	}
	if n := s.RateLimited(); n > 4 {
		t.Errorf("%d answers were 429; pacing should leave at most a few", n)
	}
	t.Logf("60 requests in %v, %d 429s", took, s.RateLimited())
}

// TestAddrForwards: with Addr the simulator is reachable there too, and
// Close releases every connection and goroutine.
func TestAddrForwards(t *testing.T) {
	s, err := sim.Start(sim.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if s.URL() == s.Server().URL {
		t.Fatalf("URL %s is the inner server's", s.URL())
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	for _, stream := range []bool{false, true} {
		body := `{"model":"echo","stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,"messages":[{"role":"user","content":"through the door"}]}`
		resp, err := c.Post(s.OpenAIBaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "[sim") || resp.Header.Get(sim.Header) != "true" {
			t.Errorf("stream=%v: %d %s", stream, resp.StatusCode, b)
		}
	}
	s.Close() // with a keep-alive connection still open
	tr.CloseIdleConnections()
	if _, err := sim.Start(sim.Options{Addr: "256.0.0.1:1"}); err == nil {
		t.Error("a bad address was accepted")
	}
}

func TestOptionsAndEnv(t *testing.T) {
	for _, o := range []sim.Options{{Latency: -1}, {TokensPerSecond: -1}, {RPM: -1}, {TPM: -2}, {Window: -time.Second}} {
		var ce *llm.ConfigError
		if _, err := sim.Start(o); !errors.As(err, &ce) {
			t.Errorf("%+v: err %v, want a ConfigError", o, err)
		}
	}
	env := map[string]string{
		sim.EnvLatency: "25ms", sim.EnvTokensPerSecond: "150.5", sim.EnvRPM: "60", sim.EnvTPM: "1000", sim.EnvWindow: "2s",
	}
	o, err := sim.FromEnvFunc(sim.Options{RPM: 5}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Options{Latency: 25 * time.Millisecond, TokensPerSecond: 150.5, RPM: 60, TPM: 1000, Window: 2 * time.Second}
	if o != want {
		t.Errorf("FromEnv = %+v, want %+v", o, want)
	}
	for name, bad := range map[string]string{sim.EnvLatency: "soon", sim.EnvRPM: "-3", sim.EnvTokensPerSecond: "NaN", sim.EnvWindow: "-1s"} {
		_, err := sim.FromEnvFunc(sim.Options{}, func(k string) string {
			if k == name {
				return bad
			}
			return ""
		})
		var ce *llm.ConfigError
		if !errors.As(err, &ce) || ce.Field != name {
			t.Errorf("%s=%q: err %v, want a ConfigError naming it", name, bad, err)
		}
	}
}
