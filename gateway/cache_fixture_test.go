package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	recorded "github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// TestCacheResponsesRecordedReasoning replays a recorded gpt-5 Responses
// stream (a reasoning item with its summary streamed and its encrypted
// content, then a function call) through the gateway twice: the
// provider's answer and the cache's both end with the recorded reasoning
// item, its id and encrypted_content, before the function call
// (invariant 7). The second call never reaches the recording, which holds
// one answer. (TestCacheResponsesEncryptedReasoning has the items a
// stream sends no summary of, and several in a row.)
func TestCacheResponsesRecordedReasoning(t *testing.T) {
	dir := recorded.Require(t)
	const file = "openai/fantasy/providertests/testdata/TestOpenAIResponsesWithSummaryThinking/openai-gpt-5/thinking-streaming.yaml"
	exs, err := recorded.Load(dir, recorded.Entry{File: file, Format: "go-vcr-v2-yaml"})
	if err != nil {
		t.Fatal(err)
	}
	// The recording's reasoning and function call items, as its stream
	// finished them.
	type item struct {
		Type             string `json:"type"`
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
		CallID           string `json:"call_id"`
	}
	var items []item
	for _, line := range strings.Split(string(exs[0].Response.Body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(d, `"response.output_item.done"`) {
			continue
		}
		var ev struct{ Item item }
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatal(err)
		}
		items = append(items, ev.Item)
	}
	if len(items) != 2 || items[0].Type != "reasoning" || items[0].EncryptedContent == "" || items[1].Type != "function_call" {
		t.Fatalf("the recording's items: %+v", items)
	}
	up := recorded.NewServer(exs[:1])
	defer up.Close()
	_, h, closeHandler := newHandler(t, cacheKeys, cacheOpt(t),
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.URL + "/v1", APIKey: providerKey,
			Models: map[string]providers.ModelCaps{"gpt-5": {Responses: true}}}))
	gw := httptest.NewServer(h)
	defer func() {
		gw.Close()
		closeHandler()
	}()
	var body map[string]any
	if err := json.Unmarshal(exs[0].Request.Body, &body); err != nil {
		t.Fatal(err)
	}
	body["model"] = "openai/gpt-5"
	b, _ := json.Marshal(body)
	for i, want := range []string{"miss", "hit"} {
		req, _ := http.NewRequest("POST", gw.URL+"/v1/responses", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer gk-a")
		resp, err := gw.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		a := answer{status: resp.StatusCode, header: resp.Header, body: raw}
		assertNoKey(t, a)
		if a.status != 200 || a.header.Get("x-chorus-cache") != want {
			t.Fatalf("call %d: %d %q, want %s: %s", i, a.status, a.header.Get("x-chorus-cache"), want, a.body)
		}
		var got []item
		for _, e := range sseEvents(a.body) {
			if e[0] == "response.completed" {
				var ev struct{ Response struct{ Output []item } }
				decode(t, []byte(e[1]), &ev)
				got = ev.Response.Output
			}
		}
		if len(got) != 2 || !reflect.DeepEqual(got[0], items[0]) || got[1].Type != "function_call" || got[1].CallID != items[1].CallID {
			t.Fatalf("call %d (%s): output %+v\nrecorded %+v", i, want, got, items)
		}
	}
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("%d upstream requests, want 1", n)
	}
}
