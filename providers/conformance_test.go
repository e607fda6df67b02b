package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
)

// TestConformance replays every non-synthetic recorded chat exchange in
// the recorded corpus (CHORUS_FIXTURES) through the matching provider client and checks the
// canonical result against facts read independently from the recording:
// the text equals the concatenated deltas, tool-call arguments are valid
// JSON, the finish reason is the canonical mapping of the recorded one, the
// token counts add up to the recorded ones, and rate-limit headers are parsed
// where present. Error exchanges must come back as an *llm.APIError with the
// recorded status.
func TestConformance(t *testing.T) {
	dir := fixture.Require(t)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	var replayed, errorsReplayed int
	skipped := map[string][]string{}
	perProvider := map[string]int{}
	for _, e := range entries {
		if e.Synthetic() {
			skipped["synthetic"] = append(skipped["synthetic"], e.File)
			continue
		}
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		for i, ex := range exs {
			kind, why := classifyExchange(e, ex)
			name := fmt.Sprintf("%s#%d", e.File, i)
			if why != "" {
				skipped[why] = append(skipped[why], name)
				continue
			}
			t.Run(name, func(t *testing.T) {
				if replayExchange(t, e, ex, kind) {
					errorsReplayed++
				}
			})
			replayed++
			perProvider[e.Provider]++
		}
	}
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	t.Logf("conformance: replayed %d recorded chat exchanges (%d of them error answers) %v", replayed, errorsReplayed, perProvider)
	for _, r := range reasons {
		t.Logf("conformance: skipped %d: %s", len(skipped[r]), r)
		for _, f := range skipped[r] {
			t.Logf("conformance:   - %s", f)
		}
	}
	if replayed < 150 {
		t.Fatalf("only %d exchanges replayed; the corpus has far more chat exchanges", replayed)
	}
}

type exchangeKind struct {
	format Format
	stream bool
	model  string
}

var geminiModelRe = regexp.MustCompile(`/models/([^:/?]+):(generateContent|streamGenerateContent)`)

// classifyExchange decides whether an exchange is a chat call this issue
// covers, and how to replay it. A non-empty reason means skip.
func classifyExchange(e fixture.Entry, ex fixture.Exchange) (exchangeKind, string) {
	k := exchangeKind{stream: ex.Response.Stream}
	u, _ := url.Parse(ex.Request.URL)
	path := ""
	if u != nil {
		path = u.Path
	}
	body := ex.Response.Body
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		k.format = FormatOpenAI
	case strings.HasSuffix(path, "/v1/messages"):
		k.format = FormatAnthropic
	case geminiModelRe.MatchString(path):
		k.format = FormatGemini
		k.model = geminiModelRe.FindStringSubmatch(path)[1]
		if strings.Contains(path, "streamGenerateContent") {
			k.stream = true
		}
	case path == "" && e.Provider == "anthropic":
		k.format = FormatAnthropic
	case path == "" && e.Provider == "gemini":
		k.format = FormatGemini
		if ex.Response.Stream {
			k.stream = true
		}
	case path == "" && (bytes.Contains(body, []byte(`"chat.completion`)) || strings.Contains(e.File, "/chat/__fixtures__/")):
		k.format = FormatOpenAI
	case path == "" && strings.Contains(e.File, "/responses/__fixtures__/"):
		return k, "OpenAI Responses API (replayed by TestConformanceResponses)"
	case path == "" && strings.Contains(e.File, "/completion/__fixtures__/"):
		return k, "legacy /completions API (not offered)"
	case path == "" && strings.Contains(e.File, "/transcription/__fixtures__/"):
		return k, "audio (replayed by TestConformanceOps)"
	case strings.Contains(path, "cachedContents"):
		return k, "Gemini context caching (not offered)"
	case strings.Contains(path, "/responses") || bytes.Contains(body, []byte(`"response.`)) || bytes.Contains(body, []byte(`"object":"response"`)) || bytes.Contains(body, []byte(`"object": "response"`)):
		return k, "OpenAI Responses API (replayed by TestConformanceResponses)"
	case strings.Contains(path, "embed") || bytes.Contains(body, []byte(`"embedding`)):
		return k, "embeddings (replayed by TestConformanceOps)"
	case strings.Contains(path, "count_tokens") || strings.Contains(path, "countTokens") || strings.Contains(path, "input_tokens"):
		return k, "token counting (replayed by TestConformanceOps)"
	case strings.Contains(path, "/models"):
		return k, "model listing (replayed by TestConformanceOps)"
	case strings.Contains(path, "/audio/"):
		return k, "audio (replayed by TestConformanceOps)"
	case strings.HasPrefix(path, "/api/"):
		return k, "Ollama native API (Chorus reaches Ollama through its OpenAI-compatible /v1)"
	default:
		return k, "not a chat endpoint"
	}
	if k.format == FormatAnthropic && strings.HasSuffix(path, "count_tokens") {
		return k, "token counting (replayed by TestConformanceOps)"
	}
	if ex.Response.Status == 0 || len(body) == 0 {
		return k, "no recorded response body"
	}
	if k.model == "" {
		var rb struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(ex.Request.Body, &rb)
		k.model = rb.Model
	}
	if k.model == "" {
		k.model = "recorded-model"
	}
	if !k.stream && k.format == FormatOpenAI && bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) {
		k.stream = true
	}
	return k, ""
}

// replayExchange replays one exchange and checks it; it reports whether the
// exchange was an error answer.
func replayExchange(t *testing.T, e fixture.Entry, ex fixture.Exchange, k exchangeKind) bool {
	srv := fixture.NewServer([]fixture.Exchange{ex})
	defer srv.Close()
	cfg := Config{ID: e.Provider, Format: k.format, BaseURL: srv.URL, APIKey: testKey}
	c := newClient(t, cfg, WithRetryPolicy(RetryPolicy{MaxAttempts: 1}))
	defer c.hc.CloseIdleConnections()
	req := &llm.ChatRequest{Model: k.model, Messages: []llm.Message{llm.UserText("replay")}}

	var res *llm.ChatResult
	var evs []llm.Event
	var err error
	if k.stream {
		var s *llm.Stream
		s, err = c.Stream(ctxT(t), req)
		if err == nil {
			evs, err = collect(s)
			res, _ = s.Result()
		}
	} else {
		res, err = c.Chat(ctxT(t), req)
	}

	if ex.Response.Status/100 != 2 {
		var api *llm.APIError
		if !errors.As(err, &api) || api.Status != ex.Response.Status || api.Message == "" {
			t.Fatalf("recorded %d: got %v, want an APIError with that status and a message", ex.Response.Status, err)
		}
		return true
	}
	if ct := ex.Response.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") && !strings.Contains(ct, "event-stream") {
		// Not an answer at all (a demo endpoint's text/plain echo): a typed decode error.
		var de *llm.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("recorded a %s 200: got %v, want a *llm.DecodeError", ct, err)
		}
		return true
	}
	if err != nil {
		var api *llm.APIError
		if errors.As(err, &api) && api.Status == 0 && recordedInStreamError(ex.Response.Body) {
			return true // an error event inside a 200 stream, typed as it should be
		}
		t.Fatalf("replay failed: %v", err)
	}
	if !res.FinishReason.Valid() {
		t.Fatalf("finish reason %q is not canonical", res.FinishReason)
	}
	if k.stream {
		if got := concat(evs, llm.EventText); got != res.Content {
			t.Fatalf("result text %q != concatenated deltas %q", res.Content, got)
		}
		if got := concat(evs, llm.EventReasoning); got != res.Reasoning {
			t.Fatalf("result reasoning != concatenated reasoning deltas")
		}
		for _, ev := range evs {
			if (ev.Type == llm.EventToolCallStart || ev.Type == llm.EventToolCallDelta) && ev.ToolIndex >= len(res.ToolCalls) {
				t.Fatalf("ToolIndex %d beyond %d calls", ev.ToolIndex, len(res.ToolCalls))
			}
		}
	}
	for i, tc := range res.ToolCalls {
		if tc.Name == "" || tc.ID == "" {
			t.Errorf("tool call %d lacks a name or id: %+v", i, tc)
		}
		if tc.Arguments != "" && !json.Valid([]byte(tc.Arguments)) {
			t.Errorf("tool call %d arguments are not JSON: %q", i, tc.Arguments)
		}
	}
	if want, ok := recordedFinish(k.format, ex.Response.Body, len(res.ToolCalls)); ok && res.FinishReason != want {
		t.Errorf("finish reason %q, recorded maps to %q", res.FinishReason, want)
	}
	if in, out, total, ok := recordedUsage(k.format, ex.Response.Body); ok {
		if res.Usage.InputTokens() != in {
			t.Errorf("usage %+v: input %d, recorded %d", res.Usage, res.Usage.InputTokens(), in)
		}
		// Completion includes reasoning (invariant 9). Where the provider
		// reports a total, it decides: some (xAI) count reasoning outside
		// completion_tokens but inside the total.
		if total > 0 {
			if res.Usage.TotalTokens() != total {
				t.Errorf("usage %+v: total %d, recorded %d", res.Usage, res.Usage.TotalTokens(), total)
			}
		} else if res.Usage.CompletionTokens != out {
			t.Errorf("usage %+v: completion %d, recorded %d", res.Usage, res.Usage.CompletionTokens, out)
		}
	}
	for h := range ex.Response.Header {
		lh := strings.ToLower(h)
		if strings.HasPrefix(lh, "x-ratelimit-limit") || strings.HasPrefix(lh, "anthropic-ratelimit-requests-limit") || strings.HasPrefix(lh, "anthropic-ratelimit-tokens-limit") {
			if rl := res.Meta.RateLimit; !rl.HasRequests && !rl.HasTokens {
				t.Errorf("recorded %s but no rate limit parsed", h)
			}
		}
	}
	return false
}

func concat(evs []llm.Event, ty llm.EventType) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == ty {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// docs returns the JSON documents of a recorded body: the body itself, the
// data of each SSE event, or the elements of a JSON array.
func docs(body []byte) []map[string]any {
	var out []map[string]any
	trim := bytes.TrimSpace(body)
	switch {
	case bytes.HasPrefix(trim, []byte("{")):
		var m map[string]any
		if json.Unmarshal(trim, &m) == nil {
			out = append(out, m)
		}
	case bytes.HasPrefix(trim, []byte("[")):
		var arr []map[string]any
		if json.Unmarshal(trim, &arr) == nil {
			out = arr
		}
	default:
		r := sse.NewReader(bytes.NewReader(body), nil)
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			var m map[string]any
			if json.Unmarshal(ev.Data, &m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

func recordedInStreamError(body []byte) bool {
	for _, d := range docs(body) {
		if _, ok := d["error"]; ok {
			return true
		}
		if d["type"] == "error" {
			return true
		}
	}
	return false
}

// recordedFinish maps the last finish reason in the recording with an
// independent table. ok is false when the recording has none.
func recordedFinish(f Format, body []byte, calls int) (llm.FinishReason, bool) {
	var raw any
	for _, d := range docs(body) {
		switch f {
		case FormatOpenAI:
			if ch, ok := d["choices"].([]any); ok {
				for _, c := range ch {
					if cm, ok := c.(map[string]any); ok && cm["finish_reason"] != nil {
						if idx, _ := cm["index"].(float64); idx == 0 {
							raw = cm["finish_reason"]
						}
					}
				}
			}
		case FormatAnthropic:
			if d["stop_reason"] != nil {
				raw = d["stop_reason"]
			}
			if dm, ok := d["delta"].(map[string]any); ok && dm["stop_reason"] != nil {
				raw = dm["stop_reason"]
			}
		case FormatGemini:
			if cs, ok := d["candidates"].([]any); ok && len(cs) > 0 {
				if cm, ok := cs[0].(map[string]any); ok && cm["finishReason"] != nil {
					raw = cm["finishReason"]
				}
			}
		}
	}
	if raw == nil {
		return "", false
	}
	table := map[string]llm.FinishReason{
		"stop": llm.FinishStop, "end_turn": llm.FinishStop, "stop_sequence": llm.FinishStop, "STOP": llm.FinishStop, "1": llm.FinishStop,
		"length": llm.FinishLength, "max_tokens": llm.FinishLength, "MAX_TOKENS": llm.FinishLength, "2": llm.FinishLength,
		"tool_calls": llm.FinishToolCalls, "function_call": llm.FinishToolCalls, "tool_use": llm.FinishToolCalls,
		"content_filter": llm.FinishContentFilter, "refusal": llm.FinishContentFilter, "SAFETY": llm.FinishContentFilter, "RECITATION": llm.FinishContentFilter, "3": llm.FinishContentFilter, "4": llm.FinishContentFilter,
	}
	want := table[fmt.Sprint(raw)]
	if want == llm.FinishStop && calls > 0 {
		want = llm.FinishToolCalls
	}
	return want, true
}

// recordedUsage reads the recording's final token counts: all input
// (cached or not), all output, and the provider's total where it reports
// one (0 otherwise). ok is false when it has no usage.
func recordedUsage(f Format, body []byte) (in, out, total int, ok bool) {
	num := func(m map[string]any, k string) int {
		v, _ := m[k].(float64)
		return int(v)
	}
	for _, d := range docs(body) {
		switch f {
		case FormatOpenAI:
			if u, isMap := d["usage"].(map[string]any); isMap {
				in, out, total, ok = num(u, "prompt_tokens"), num(u, "completion_tokens"), num(u, "total_tokens"), true
				if _, has := u["prompt_tokens"]; !has {
					ok = false
				}
			}
		case FormatAnthropic:
			u, isMap := d["usage"].(map[string]any)
			if m, isMsg := d["message"].(map[string]any); isMsg {
				u, isMap = m["usage"].(map[string]any)
			}
			if isMap {
				if _, has := u["input_tokens"]; has {
					in = num(u, "input_tokens") + num(u, "cache_read_input_tokens") + num(u, "cache_creation_input_tokens")
				}
				if _, has := u["output_tokens"]; has {
					out = num(u, "output_tokens")
				}
				ok = true
			}
		case FormatGemini:
			if u, isMap := d["usageMetadata"].(map[string]any); isMap {
				in, out, total, ok = num(u, "promptTokenCount")+num(u, "toolUsePromptTokenCount"), num(u, "candidatesTokenCount")+num(u, "thoughtsTokenCount"), num(u, "totalTokenCount"), true
			}
		}
	}
	return in, out, total, ok
}
