package anthropic

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/sse"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// TestReplayOverHTTP sends a built request to a loopback server replaying a
// recorded stream and decodes the chunked body as it arrives.
func TestReplayOverHTTP(t *testing.T) {
	dir := fixture.Require(t)
	idx, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	var exs []fixture.Exchange
	for _, e := range idx {
		if e.File == "anthropic/fantasy/providertests/testdata/TestAnthropicThinking/claude-sonnet-4/thinking-streaming.yaml" {
			if exs, err = fixture.Load(dir, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(exs) == 0 {
		t.Fatal("recording not found")
	}
	srv := fixture.NewServer(exs[:1])
	defer srv.Close()

	codec := Codec{}
	wr, err := codec.ChatRequest(&llm.ChatRequest{
		Model: "claude-sonnet-4-20250514", Messages: []llm.Message{llm.UserText("What's the weather in Florence, Italy?")},
		Reasoning: &llm.Reasoning{BudgetTokens: 4000}, MaxTokens: 4096,
		Tools: []llm.Tool{{Name: "weather"}},
	}, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	hreq, err := http.NewRequestWithContext(t.Context(), wr.Method, srv.URL+wr.Path, bytes.NewReader(wr.Body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header = wr.Header
	codec.Authorize(hreq.Header, "sk-test", wire.Quirks{})
	resp, err := srv.Client().Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	d := codec.NewStreamDecoder()
	rd := sse.NewReader(resp.Body, nil)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		done, err := d.Feed(ev.Name, ev.Data, func(llm.Event) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	if !d.Complete() {
		t.Fatal("stream not complete")
	}
	res := d.Result()
	if len(res.ThinkingBlocks) != 1 || res.ThinkingBlocks[0].Signature == "" || len(res.ToolCalls) != 1 ||
		res.ToolCalls[0].Arguments != `{"location": "Florence, Italy"}` && res.ToolCalls[0].Arguments != `{"location":"Florence, Italy"}` ||
		res.FinishReason != llm.FinishToolCalls {
		t.Errorf("result = %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests served", len(reqs))
	}
	got := reqs[0]
	if got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != "sk-test" || got.Header.Get("Anthropic-Version") != "2023-06-01" ||
		got.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("server saw %s with headers %v", got.Path, got.Header)
	}
	if !bytes.Contains(got.Body, []byte(`"stream":true`)) || !bytes.Contains(got.Body, []byte(`"thinking":{"type":"enabled","budget_tokens":4000}`)) {
		t.Errorf("body %s", got.Body)
	}
}
