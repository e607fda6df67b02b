package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	rec "github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// thinkingBlock is one streamed thinking block: its text from
// thinking_delta events and its signature from signature_delta events.
type thinkingBlock struct{ Text, Signature string }

// streamedThinking reads an Anthropic SSE body: its thinking blocks, in
// order, and its text.
func streamedThinking(t *testing.T, body []byte) ([]thinkingBlock, string) {
	t.Helper()
	var blocks []thinkingBlock
	byIndex := map[int]int{}
	var text strings.Builder
	for _, ev := range sseEvents(body) {
		var e struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type      string `json:"type"`
				Thinking  string `json:"thinking"`
				Signature string `json:"signature"`
				Text      string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(ev[1]), &e) != nil {
			continue
		}
		switch {
		case e.Type == "content_block_start" && e.ContentBlock.Type == "thinking":
			byIndex[e.Index] = len(blocks)
			blocks = append(blocks, thinkingBlock{})
		case e.Type == "content_block_delta" && e.Delta.Type == "thinking_delta":
			blocks[byIndex[e.Index]].Text += e.Delta.Thinking
		case e.Type == "content_block_delta" && e.Delta.Type == "signature_delta":
			blocks[byIndex[e.Index]].Signature += e.Delta.Signature
		case e.Type == "content_block_delta" && e.Delta.Type == "text_delta":
			text.WriteString(e.Delta.Text)
		}
	}
	return blocks, text.String()
}

// TestAnthropicThinkingSignatureDelta replays every recorded Anthropic
// thinking stream of the fixture corpus behind the gateway: an Anthropic
// client streaming through it gets each thinking block's text and its
// signature_delta exactly as Anthropic sent them.
func TestAnthropicThinkingSignatureDelta(t *testing.T) {
	dir, err := rec.Dir()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := rec.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, e := range entries {
		if e.Provider != "anthropic" || !slices.Contains(e.Features, "stream") || !slices.Contains(e.Features, "reasoning") {
			continue
		}
		exs, err := rec.Load(dir, e)
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		for i, ex := range exs {
			if !ex.Response.Stream || ex.Response.Status != 0 && ex.Response.Status != 200 || !bytes.Contains(ex.Response.Body, []byte("signature_delta")) {
				continue
			}
			want, wantText := streamedThinking(t, ex.Response.Body)
			if len(want) == 0 {
				continue
			}
			tested++
			t.Run(e.File+"#"+string(rune('0'+i)), func(t *testing.T) {
				got, gotText := throughGateway(t, ex)
				if !slices.Equal(got, want) || gotText != wantText {
					t.Errorf("through the gateway:\n%+v %q\nrecorded:\n%+v %q", got, gotText, want, wantText)
				}
			})
		}
	}
	if tested < 3 {
		t.Fatalf("%d recorded thinking streams with signatures, want at least 3", tested)
	}
}

// throughGateway streams one recorded exchange through a gateway whose
// Anthropic provider replays it, as an Anthropic client, and reads what
// the client got.
func throughGateway(t *testing.T, ex rec.Exchange) ([]thinkingBlock, string) {
	t.Helper()
	srv := rec.NewServer([]rec.Exchange{ex})
	defer srv.Close()
	_, h, closeHandler := newHandler(t, gateway.Options{},
		runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: srv.URL, APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(time.Minute)),
	)
	defer closeHandler()
	gw := httptest.NewServer(h)
	defer gw.Close()
	body := `{"model":"anthropic/claude-sonnet-4-5","max_tokens":2048,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"think"}]}`
	resp, err := gw.Client().Post(gw.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), "event: message_stop") {
		t.Fatalf("status %d: %s", resp.StatusCode, b.String())
	}
	return streamedThinking(t, b.Bytes())
}
