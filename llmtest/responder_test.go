package llmtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestResponderAnswersByContent: with the script empty, each format's
// request is answered by the responder from its own content; a pushed step
// still answers first; nil restores the default reply.
func TestResponderAnswersByContent(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	var calls atomic.Int64
	srv.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		calls.Add(1)
		return llmtest.Text("dyn:" + string(r.Format) + ":" + r.Model)
	})
	for _, ep := range endpoints {
		res := post(t, c, ep.url(srv, false), ep.body(false))
		if res.resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", ep.format, res.resp.StatusCode, res.body)
		}
		want := "dyn:" + string(ep.format) + ":" + model
		if !strings.Contains(string(res.body), want) {
			t.Errorf("%s: body %s does not hold %q", ep.format, res.body, want)
		}
	}
	srv.Push(llmtest.Text("scripted"))
	res := post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
	if !strings.Contains(string(res.body), `"content":"scripted"`) {
		t.Errorf("scripted step did not answer first: %s", res.body)
	}
	if got := calls.Load(); got != int64(len(endpoints)) {
		t.Errorf("responder called %d times, want %d (not for the scripted step)", got, len(endpoints))
	}
	srv.SetResponder(nil)
	res = post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
	if !strings.Contains(string(res.body), `"content":"simulated reply"`) {
		t.Errorf("default reply not restored: %s", res.body)
	}
}

// TestResponderFaultsAndOps: a responder Fault with Kind zero is a status
// fault, and non-chat operations take the responder's Usage and headers.
func TestResponderFaultsAndOps(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	srv.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		if strings.HasSuffix(r.Path, "/embeddings") {
			return llmtest.Respond(llmtest.Reply{Usage: &llm.Usage{PromptTokens: 42}, Header: map[string]string{"X-Dyn": "yes"}})
		}
		return llmtest.Fail(llmtest.Fault{Status: http.StatusTeapot, Message: "dyn fault"})
	})
	res := post(t, c, openaiEP.url(srv, false), openaiEP.body(false))
	if res.resp.StatusCode != http.StatusTeapot || !strings.Contains(string(res.body), "dyn fault") {
		t.Fatalf("want 418 dyn fault, got %d %s", res.resp.StatusCode, res.body)
	}
	res = post(t, c, srv.OpenAIBaseURL()+"/embeddings", `{"model":"e","input":["a","b"]}`)
	if res.resp.StatusCode != http.StatusOK || res.resp.Header.Get("X-Dyn") != "yes" {
		t.Fatalf("embeddings: %d %v %s", res.resp.StatusCode, res.resp.Header, res.body)
	}
	var body struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(res.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Usage.PromptTokens != 42 || len(body.Data) != 2 {
		t.Errorf("usage %d, %d vectors; want 42 and 2", body.Usage.PromptTokens, len(body.Data))
	}
	for _, d := range body.Data {
		want := llmtest.EmbeddingFor([]string{"a", "b"}[d.Index], 0)
		if len(d.Embedding) != len(want) || d.Embedding[0] != want[0] {
			t.Errorf("vector %d = %v, want %v", d.Index, d.Embedding, want)
		}
	}
}
