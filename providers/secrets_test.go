package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/faultmatrix"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// Secrets and bad input (issue 8).

// secretEntry is one entry point of a Client.
type secretEntry struct {
	name string
	call func(ctx context.Context, c *Client) (results []any, evs []llm.Event, err error)
}

func secretEntries() []secretEntry {
	chatReq := func() *llm.ChatRequest {
		// Temperature is set so that a rejection of it teaches a flag (and
		// produces a learn event and a log line).
		return &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hello")}, Temperature: llm.Ptr(0.5)}
	}
	return []secretEntry{
		{"chat", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.Chat(ctx, chatReq())
			return []any{res}, nil, err
		}},
		{"stream", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			s, err := c.Stream(ctx, chatReq())
			if err != nil {
				return nil, nil, err
			}
			evs, err := collect(s)
			res, _ := s.Result()
			return []any{res}, evs, err
		}},
		{"embed", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.Embed(ctx, &llm.EmbedRequest{Model: "m", Inputs: []string{"a", "b"}})
			return []any{res}, nil, err
		}},
		{"speak", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.Speak(ctx, &llm.SpeechRequest{Model: "m", Input: "hello", Voice: "alloy"})
			return []any{res}, nil, err
		}},
		{"transcribe", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.Transcribe(ctx, &llm.TranscriptionRequest{Model: "m", Audio: []byte("RIFF....WAVEfmt "), Filename: "a.wav"})
			return []any{res}, nil, err
		}},
		{"count_tokens", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.CountTokens(ctx, chatReq())
			return []any{res}, nil, err
		}},
		{"list_models", func(ctx context.Context, c *Client) ([]any, []llm.Event, error) {
			res, err := c.ListModels(ctx)
			return []any{res}, nil, err
		}},
	}
}

// secretFault is a fault that makes the provider echo the key.
type secretFault struct {
	name  string
	steps []llmtest.Step
	// echoed: the key travels in an error status body that every entry
	// point reads, so the call's error or attempt events must show
	// [REDACTED] (proof that the echo reached the client).
	echoed bool
}

func secretFaults() []secretFault {
	k := faultmatrix.Key
	f := func(fl llmtest.Fault) llmtest.Step { return llmtest.Step{Fault: &fl} }
	return []secretFault{
		// The key in the message, the code and the type of a final error.
		{"401-echo", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 401, Code: "invalid_api_key " + k, Type: k, Message: faultmatrix.KeyEcho})}, true},
		// A retried error: the key shows in the first attempt's event.
		{"429-echo-then-ok", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 429, RetryAfter: 5 * time.Millisecond, Code: k, Message: faultmatrix.KeyEcho})}, true},
		// A rejection that teaches a flag: the learn event and the log line.
		{"400-learn-echo", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400,
			Message: "Unsupported parameter: 'temperature' is not supported with this model. " + faultmatrix.KeyEcho})}, true},
		// A rejection that moves the model to the Responses API (OpenAI chat).
		{"404-route-echo", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultStatus, Status: 404,
			Message: "This model is only supported in v1/responses and not in v1/chat/completions. " + faultmatrix.KeyEcho})}, true},
		// An error event inside a 200 stream after output (a 200 error body
		// for buffered calls), with the key in every field.
		{"in-stream-echo", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultInStreamError, After: 2, Status: 400, Code: k, Type: k, Message: faultmatrix.KeyEcho})}, false},
		// A transport failure: its text carries the URL, never the key.
		{"reset", []llmtest.Step{f(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 1})}, false},
	}
}

// TestSecretsNeverLeak runs every entry point of every format (the
// Responses route included) against faults that make the provider echo the
// key, collects every error string, every String() and %v rendering of the
// configs, clients and results, every log line (slog JSON and text handlers
// into one buffer), every attempt, learn and stream event, and scans all of
// it for the key and for its last 8 characters.
func TestSecretsNeverLeak(t *testing.T) {
	var rec faultmatrix.Recorder
	jsonLog := rec.Logger()
	textLog := slog.New(slog.NewTextHandler(&rec, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var outputs []string
	calls, supported, redactedSeen := 0, 0, 0
	for _, f := range faultmatrix.Formats {
		for _, e := range secretEntries() {
			for _, fault := range secretFaults() {
				srv := llmtest.NewServer()
				srv.Push(fault.steps...)
				cfg := mxConfig(f, srv)
				hc := NewHTTPClient()
				before := len(rec.Texts())
				c, err := New(cfg, WithHTTPClient(hc), WithRetryPolicy(mxRetry), WithTimeout(5*time.Second), WithIdleTimeout(time.Second),
					WithAttemptObserver(func(ev AttemptEvent) { rec.Attempt(ev, ev.Err) }), WithLearnObserver(func(ev LearnEvent) { rec.Learned(ev) }), WithLogger(jsonLog))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				results, evs, err := e.call(ctx, c)
				cancel()
				calls++
				where := f.Name + "/" + e.name + "/" + fault.name

				// Everything the call produced, printed every way a program would.
				var mine []string
				if err != nil {
					mine = append(mine, err.Error(), fmt.Sprintf("%v|%+v|%#v|%s|%q", err, err, err, err, err))
				}
				for _, r := range results {
					mine = append(mine, fmt.Sprintf("%v|%+v|%#v", r, r, r))
					if b, jerr := json.Marshal(r); jerr == nil {
						mine = append(mine, string(b))
					}
				}
				for _, ev := range evs {
					mine = append(mine, fmt.Sprintf("%+v|%#v", ev, ev))
				}
				mine = append(mine, c.String(), fmt.Sprintf("%v|%+v|%#v|%s", c, c, c, c),
					cfg.String(), fmt.Sprintf("%v|%+v|%#v|%s|%q", cfg, cfg, cfg, cfg.APIKey, cfg.APIKey))
				if b, jerr := json.Marshal(cfg); jerr == nil {
					mine = append(mine, string(b))
				}
				// The program logs the call the way a service would.
				for _, l := range []*slog.Logger{jsonLog, textLog} {
					l.Error("call failed", "where", where, "err", err, "config", cfg, "client", c, "key", cfg.APIKey)
				}
				mine = append(mine, rec.Texts()[before:]...)
				outputs = append(outputs, mine...)

				if !errors.Is(err, llm.ErrUnsupported) {
					supported++
					if fault.echoed {
						found := false
						for _, s := range mine {
							found = found || strings.Contains(s, redacted)
						}
						if !found {
							t.Errorf("%s: the provider echoed the key but no output shows it redacted: the fault did not reach the client (err %v)", where, err)
						} else {
							redactedSeen++
						}
					}
				}
				for _, r := range srv.Requests() {
					if !strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Goog-Api-Key"), faultmatrix.Key) {
						t.Errorf("%s: a request reached the server without the key in its auth header", where)
					}
				}
				if l := faultmatrix.Leaks(faultmatrix.Key, mine); len(l) > 0 {
					t.Errorf("%s: the key leaked into %d outputs, e.g. %q", where, len(l), l[0])
				}
				c.CloseIdleConnections()
				srv.Close()
			}
		}
	}
	outputs = append(outputs, rec.Texts()...)
	if l := faultmatrix.Leaks(faultmatrix.Key, outputs); len(l) > 0 {
		t.Errorf("the key leaked into %d outputs", len(l))
	}
	// The scan must have had something to find: many echoes went through.
	if redactedSeen < 40 || rec.LearnEvents() == 0 {
		t.Fatalf("only %d redacted echoes and %d learn events: the faults did not exercise redaction", redactedSeen, rec.LearnEvents())
	}
	t.Logf("secrets: %d calls (%d on supported entry points), %d outputs scanned, %d redacted echoes, %d learn events",
		calls, supported, len(outputs), redactedSeen, rec.LearnEvents())
}

// boundaryCase is a request the boundary must refuse: a *llm.ConfigError
// naming Field, and nothing sent.
type boundaryCase struct {
	name  string
	field string
	// one of these is set
	chat *llm.ChatRequest
	op   func(ctx context.Context, c *Client) error
}

// TestBoundaryValidation extends TestInvariant04 (client_test.go) and
// llm.TestValidate: each bad request, on every format and every entry point
// that takes it (Chat, Stream, CountTokens, the Responses route, Embed,
// Speak, Transcribe), is a *llm.ConfigError with the exact Field and costs
// no request.
func TestBoundaryValidation(t *testing.T) {
	// Small caps so that oversize parts need no large buffers.
	oldPart, oldInline, oldAudio := llm.MaxPartBytes, llm.MaxRequestInlineBytes, llm.MaxTranscriptionBytes
	llm.MaxPartBytes, llm.MaxRequestInlineBytes, llm.MaxTranscriptionBytes = 1<<10, 3<<10, 2<<10
	t.Cleanup(func() {
		llm.MaxPartBytes, llm.MaxRequestInlineBytes, llm.MaxTranscriptionBytes = oldPart, oldInline, oldAudio
	})

	user := llm.UserText("hi")
	img := func(n int) llm.Part { return llm.ImagePart("image/png", make([]byte, n)) }
	tool := func(params string) []llm.Tool {
		return []llm.Tool{{Name: "t", Parameters: json.RawMessage(params)}}
	}
	chat := func(mut func(r *llm.ChatRequest)) *llm.ChatRequest {
		r := &llm.ChatRequest{Model: "m", Messages: []llm.Message{user}}
		mut(r)
		return r
	}
	cases := []boundaryCase{
		// Unknown roles, wherever they are.
		{name: "role empty", field: "messages[0].role", chat: chat(func(r *llm.ChatRequest) { r.Messages = []llm.Message{{Content: "x"}} })},
		{name: "role function", field: "messages[1].role", chat: chat(func(r *llm.ChatRequest) { r.Messages = append(r.Messages, llm.Message{Role: "function", Content: "x"}) })},
		{name: "role case", field: "messages[0].role", chat: chat(func(r *llm.ChatRequest) { r.Messages = []llm.Message{{Role: "User", Content: "x"}} })},
		// Empty messages.
		{name: "empty user message", field: "messages[0].content", chat: chat(func(r *llm.ChatRequest) { r.Messages = []llm.Message{{Role: llm.RoleUser}} })},
		{name: "empty system message", field: "messages[0].content", chat: chat(func(r *llm.ChatRequest) { r.Messages = []llm.Message{{Role: llm.RoleSystem}, user} })},
		{name: "nil messages", field: "messages", chat: chat(func(r *llm.ChatRequest) { r.Messages = nil })},
		{name: "tool call without name", field: "messages[1].tool_calls[0].name", chat: chat(func(r *llm.ChatRequest) {
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Arguments: "{}"}}})
		})},
		{name: "tool call arguments not JSON", field: "messages[1].tool_calls[0].arguments", chat: chat(func(r *llm.ChatRequest) {
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: `{"a":`}}})
		})},
		// Invalid tool schemas.
		{name: "tool schema array", field: "tools[0].parameters", chat: chat(func(r *llm.ChatRequest) { r.Tools = tool(`[]`) })},
		{name: "tool schema type array", field: "tools[0].parameters.type", chat: chat(func(r *llm.ChatRequest) { r.Tools = tool(`{"type":"array","items":{}}`) })},
		{name: "tool schema truncated", field: "tools[0].parameters", chat: chat(func(r *llm.ChatRequest) { r.Tools = tool(`{"type":"object"`) })},
		{name: "tool without name", field: "tools[0].name", chat: chat(func(r *llm.ChatRequest) { r.Tools = []llm.Tool{{Parameters: json.RawMessage(`{}`)}} })},
		{name: "duplicate tool", field: "tools[1].name", chat: chat(func(r *llm.ChatRequest) { r.Tools = []llm.Tool{{Name: "t"}, {Name: "t"}} })},
		{name: "json schema missing", field: "response_format.schema", chat: chat(func(r *llm.ChatRequest) {
			r.ResponseFormat = &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Schema: json.RawMessage(`{"type":`)}
		})},
		// Oversize parts.
		{name: "oversize image", field: "messages[0].parts[1]", chat: chat(func(r *llm.ChatRequest) {
			r.Messages = []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("look"), img(llm.MaxPartBytes + 1)}}}
		})},
		{name: "oversize document", field: "messages[0].parts[0]", chat: chat(func(r *llm.ChatRequest) {
			r.Messages = []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartDocument, MIMEType: "application/pdf", Data: make([]byte, llm.MaxPartBytes+1)}}}}
		})},
		{name: "oversize request", field: "messages", chat: chat(func(r *llm.ChatRequest) {
			for i := 0; i < 4; i++ {
				r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{img(llm.MaxPartBytes)}})
			}
		})},
		// Reserved headers set by the caller, whatever their case.
		{name: "header x-api-key", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"x-api-key": "k"} })},
		{name: "header x-goog-api-key", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"X-GOOG-API-KEY": "k"} })},
		{name: "header api-key", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"Api-Key": "k"} })},
		{name: "header content-type", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"content-type": "text/plain"} })},
		{name: "header host", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"Host": "evil.example"} })},
		{name: "header anthropic-version", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"anthropic-version": "2020-01-01"} })},
		{name: "header CRLF injection", field: "headers", chat: chat(func(r *llm.ChatRequest) { r.Headers = map[string]string{"X-Trace": "a\r\nAuthorization: Bearer x"} })},
		// The other entry points.
		{name: "embed reserved header", field: "headers", op: func(ctx context.Context, c *Client) error {
			_, err := c.Embed(ctx, &llm.EmbedRequest{Model: "m", Inputs: []string{"a"}, Headers: map[string]string{"authorization": "Bearer x"}})
			return err
		}},
		{name: "embed empty input", field: "inputs[1]", op: func(ctx context.Context, c *Client) error {
			_, err := c.Embed(ctx, &llm.EmbedRequest{Model: "m", Inputs: []string{"a", ""}})
			return err
		}},
		{name: "speak reserved header", field: "headers", op: func(ctx context.Context, c *Client) error {
			_, err := c.Speak(ctx, &llm.SpeechRequest{Model: "m", Input: "hi", Headers: map[string]string{"X-Goog-Api-Key": "k"}})
			return err
		}},
		{name: "speak empty input", field: "input", op: func(ctx context.Context, c *Client) error {
			_, err := c.Speak(ctx, &llm.SpeechRequest{Model: "m", Input: " "})
			return err
		}},
		{name: "transcribe oversize audio", field: "audio", op: func(ctx context.Context, c *Client) error {
			_, err := c.Transcribe(ctx, &llm.TranscriptionRequest{Model: "m", Audio: make([]byte, llm.MaxTranscriptionBytes+1)})
			return err
		}},
		{name: "transcribe reserved header", field: "headers", op: func(ctx context.Context, c *Client) error {
			_, err := c.Transcribe(ctx, &llm.TranscriptionRequest{Model: "m", Audio: []byte("RIFF"), Headers: map[string]string{"Content-Length": "1"}})
			return err
		}},
	}
	runBoundaryCases(t, cases)
}

// runBoundaryCases runs each case on every format and entry point, and
// checks that no request reached the server.
func runBoundaryCases(t *testing.T, cases []boundaryCase) {
	t.Helper()
	srv := llmtest.NewServer()
	defer srv.Close()
	checked := 0
	for _, f := range faultmatrix.Formats {
		c, err := New(mxConfig(f, srv), WithRetryPolicy(RetryPolicy{MaxAttempts: 1}), WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		check := func(where, field string, err error) {
			t.Helper()
			if errors.Is(err, llm.ErrUnsupported) {
				return // the format lacks the operation: refused before validation, nothing sent
			}
			checked++
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != field {
				t.Errorf("%s/%s: got %T %v, want *llm.ConfigError on %q", f.Name, where, err, err, field)
			}
		}
		ctx := ctxT(t)
		for _, bc := range cases {
			if bc.op != nil {
				check(bc.name, bc.field, bc.op(ctx, c))
				continue
			}
			_, err := c.Chat(ctx, bc.chat)
			check("chat/"+bc.name, bc.field, err)
			s, err := c.Stream(ctx, bc.chat)
			if s != nil {
				s.Close()
				t.Errorf("%s/stream/%s: a stream was started", f.Name, bc.name)
			}
			check("stream/"+bc.name, bc.field, err)
			var res *llm.ChatResult
			res, err = c.StreamTo(ctx, bc.chat, func(llm.Event) bool { return true })
			if res != nil {
				t.Errorf("%s/stream_to/%s: a result came back", f.Name, bc.name)
			}
			check("stream_to/"+bc.name, bc.field, err)
			_, err = c.CountTokens(ctx, bc.chat)
			check("count_tokens/"+bc.name, bc.field, err)
		}
		c.CloseIdleConnections()
	}
	if n := srv.Count(); n != 0 {
		t.Fatalf("%d requests reached the server; a refused request must cost none", n)
	}
	if checked < len(cases)*len(faultmatrix.Formats) {
		t.Fatalf("only %d checks ran", checked)
	}
}

// TestBoundaryMalformedHeaders: a per-call header the HTTP layer cannot
// send (an empty or spaced name, a control byte in the value) is refused
// at the boundary like a CRLF, not discovered by net/http after the
// request was built and then retried as a transport failure.
func TestBoundaryMalformedHeaders(t *testing.T) {
	chat := func(h map[string]string) *llm.ChatRequest {
		return &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("hi")}, Headers: h}
	}
	runBoundaryCases(t, []boundaryCase{
		{name: "header name with a space", field: "headers", chat: chat(map[string]string{"X Trace": "1"})},
		{name: "empty header name", field: "headers", chat: chat(map[string]string{"": "1"})},
		{name: "NUL in a header value", field: "headers", chat: chat(map[string]string{"X-Trace": "a\x00b"})},
		{name: "embed: NUL in a header value", field: "headers", op: func(ctx context.Context, c *Client) error {
			_, err := c.Embed(ctx, &llm.EmbedRequest{Model: "m", Inputs: []string{"a"}, Headers: map[string]string{"X-Trace": "a\x00b"}})
			return err
		}},
	})
}
