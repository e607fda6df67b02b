package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestStreamNeverHoldsADeltaBack: the upstream sends each delta only
// after the client has received the one before, so a gateway that held a
// delta back until another arrived (to batch its writes) would never end.
// Each format's stream, the text frame in use from the second delta on.
func TestStreamNeverHoldsADeltaBack(t *testing.T) {
	for _, c := range []struct{ name, path, body, delta, end string }{
		{"openai", "/v1/chat/completions", `{"model":"openai/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"content":"d`, "data: [DONE]"},
		{"anthropic", "/v1/messages", `{"model":"openai/m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"text":"d`, "event: message_stop"},
		{"gemini", "/v1beta/models/openai/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `"text":"d`, `"finishReason"`},
	} {
		t.Run(c.name, func(t *testing.T) { lockStep(t, c.path, c.body, c.delta, c.end) })
	}
}

// lockStep streams path through a gateway whose upstream sends its next
// delta only once the client has received the one before.
func lockStep(t *testing.T, path, body, delta, end string) {
	const deltas = 6
	ack := make(chan struct{}, deltas) // the client never blocks on it
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range deltas {
			if i > 0 {
				select {
				case <-ack:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"d%d "},"finish_reason":null}]}`+"\n\n", i)
			if rc.Flush() != nil {
				return
			}
		}
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	defer up.CloseClientConnections()
	_, h, closeHandler := newHandler(t, gateway.Options{},
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.URL + "/v1", APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1})),
	)
	defer closeHandler()
	gw := httptest.NewServer(h)
	defer gw.Close()
	defer gw.CloseClientConnections()
	defer gw.Client().CloseIdleConnections()

	// A liveness bound, not a speed one: a passing stream takes
	// milliseconds; one held back never ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := gw.Client().Do(req)
	if err != nil {
		t.Fatalf("the answer's headers never came (held back with the first delta?): %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-t.Context().Done():
				return
			}
		}
	}()
	defer func() {
		resp.Body.Close()
		for range lines { // the reader goroutine ends with the body
		}
	}()
	got := 0
	for ended := false; !ended; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended after %d of %d deltas, without its end", got, deltas)
			}
			if strings.Contains(line, delta+fmt.Sprint(got)+" ") {
				got++
				ack <- struct{}{} // the upstream sends the next one now
			}
			ended = strings.Contains(line, end)
		case <-time.After(30 * time.Second):
			if got == deltas {
				t.Fatal("the stream's end never reached the client")
			}
			t.Fatalf("delta %d never reached the client: held back for a delta that was not coming", got)
		}
	}
	if got != deltas {
		t.Fatalf("%d deltas of %d", got, deltas)
	}
}
