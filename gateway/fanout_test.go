package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

// TestFanOutAlias: a fan-out alias sends a chat completion to each of its
// models at once and answers with a choice per model (choice i: model i),
// buffered and streamed; a model that fails has no choice and is named in
// x-chorus-fanout-failed; the usage is the sum; other endpoints refuse the
// name; the model list holds it; a key that may not call each model may
// not call it.
func TestFanOutAlias(t *testing.T) {
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := gateway.Options{
		FanOut: map[string][]string{"trio": {"sim/alpha", "openai/gpt-4.1-mini", "sim/beta"}, "none": {"nope/x"}},
		Keys: []gateway.Key{
			{Name: "all", SHA256: gateway.HashKey("gk-all")},
			{Name: "sim-only", SHA256: gateway.HashKey("gk-sim"), Models: []string{"sim/*"}},
		},
	}
	f := newFixture(t, opts, runtime.WithProvider(s.Config()))
	auth := []string{"Authorization", "Bearer gk-all"}
	const body = `{"model":"trio","messages":[{"role":"user","content":"tell me"}]}`

	f.up.Push(llmtest.Status(400, 0)) // openai/gpt-4.1-mini: a 400, not retried
	a := f.do(t, "POST", "/v1/chat/completions", body, auth...)
	var c struct {
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	decode(t, a.body, &c)
	if a.status != 200 || a.header.Get("x-chorus-fanout-failed") != "1=400" || c.Model != "trio" || len(c.Choices) != 2 ||
		c.Choices[0].Index != 0 || !strings.HasPrefix(c.Choices[0].Message.Content, "[simulated alpha]") ||
		c.Choices[1].Index != 2 || !strings.HasPrefix(c.Choices[1].Message.Content, "[simulated beta]") ||
		c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens == 0 {
		t.Fatalf("buffered: %d %v %s", a.status, a.header, a.body)
	}

	// Streamed: each choice's deltas add up to its buffered answer.
	f.up.Push(llmtest.Status(400, 0))
	req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(strings.Replace(body, `"model"`, `"stream":true,"stream_options":{"include_usage":true},"model"`, 1)))
	req.Header.Set(auth[0], auth[1])
	resp, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	a = answer{status: resp.StatusCode, header: resp.Header}
	a.body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	// The failed model is named in the headers, or in the trailers when
	// another model's first chunk went before it failed.
	named := resp.Header.Get("x-chorus-fanout-failed") + resp.Trailer.Get("x-chorus-fanout-failed")
	if err != nil || a.status != 200 || named != "1=400" || !bytes.HasSuffix(a.body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream: %v %d %v %v %s", err, a.status, a.header, resp.Trailer, a.body)
	}
	text, finish := map[int]string{}, map[int]string{}
	usage := 0
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		decode(t, []byte(data), &ch)
		for _, x := range ch.Choices {
			text[x.Index] += x.Delta.Content
			if x.FinishReason != nil {
				finish[x.Index] = *x.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage.TotalTokens
		}
	}
	if len(text) != 2 || text[0] != c.Choices[0].Message.Content || text[2] != c.Choices[1].Message.Content || finish[0] != "stop" || finish[2] != "stop" || usage == 0 {
		t.Fatalf("stream choices %v, finish %v, usage %d", text, finish, usage)
	}

	if a := f.do(t, "POST", "/v1/chat/completions", strings.Replace(body, "trio", "none", 1), auth...); a.status != 404 || a.header.Get("x-chorus-fanout-failed") != "0=404" {
		t.Errorf("every model failing: %d %v %s", a.status, a.header, a.body)
	}
	if a := f.do(t, "POST", "/v1/chat/completions", `{"model":"none","stream":true,"messages":[{"role":"user","content":"x"}]}`, auth...); a.status != 404 {
		t.Errorf("every model failing, streamed: %d %s", a.status, a.body)
	}
	if a := f.do(t, "POST", "/v1/messages", `{"model":"trio","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "x-api-key", "gk-all"); a.status != 400 || !strings.Contains(string(a.body), "fan-out") {
		t.Errorf("fan-out on /v1/messages: %d %s", a.status, a.body)
	}
	if a := f.do(t, "POST", "/v1/chat/completions", body, "Authorization", "Bearer gk-sim"); a.status != 403 {
		t.Errorf("a key that may not call openai/*: %d %s", a.status, a.body)
	}
	var list struct{ Data []struct{ ID string } }
	decode(t, f.do(t, "GET", "/v1/models", "", auth...).body, &list)
	ids := []string{}
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if !strings.Contains(strings.Join(ids, ","), "trio") {
		t.Errorf("models %v", ids)
	}
	// A batch line naming a fan-out fails the batch's validation.
	in := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":` + body + "}\n"
	var file struct{ ID string }
	decode(t, f.upload(t, "gk-all", "batch", "in.jsonl", []byte(in)).body, &file)
	var created batchObj
	decode(t, f.do(t, "POST", "/v1/batches", `{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`, auth...).body, &created)
	if b := f.waitBatch(t, "gk-all", created.ID); b.Status != "failed" || b.Errors == nil || len(b.Errors.Data) != 1 || !strings.Contains(b.Errors.Data[0].Message, "fan-out") {
		t.Errorf("a batch of a fan-out: %+v", b)
	}
	chats := 0
	for _, r := range f.up.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			chats++
		}
	}
	if chats != 2 {
		t.Errorf("%d chat calls reached the fake provider, want 2", chats)
	}
	waitNoneInFlight(t, f)
}

// TestFanOutStreamFailureAndDisconnect: a fan-out model that fails after
// its choice began ends the stream with the in-band error (no [DONE]); a
// client that leaves a fan-out stream cancels every model's call.
func TestFanOutStreamFailureAndDisconnect(t *testing.T) {
	f := newFixture(t, gateway.Options{FanOut: map[string][]string{"pair": {"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"}}})
	const body = `{"model":"pair","stream":true,"messages":[{"role":"user","content":"x"}]}`
	f.up.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}),
		llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetMidStream, After: 2, Reply: &llmtest.Reply{Deltas: []string{"a", "b", "c", "d"}}}))
	a := f.do(t, "POST", "/v1/chat/completions", body)
	if a.status != 200 || !strings.Contains(string(a.body), `data: {"error":`) || strings.Contains(string(a.body), "[DONE]") {
		t.Fatalf("mid-stream failure: %d %s", a.status, a.body)
	}
	waitNoneInFlight(t, f)

	// A new fixture: the first part may leave a step its cancelled model never took.
	f = newFixture(t, gateway.Options{FanOut: map[string][]string{"pair": {"openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"}}})
	stall := llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, After: 1, Stall: 5 * time.Minute, Reply: &llmtest.Reply{Deltas: []string{"first", "never"}}})
	f.up.Push(stall, stall)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := f.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if n, err := resp.Body.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	for deadline := time.Now().Add(20 * time.Second); f.up.OpenConns() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections, want 2", f.up.OpenConns())
		}
	}
	cancel()
	resp.Body.Close()
	for deadline := time.Now().Add(20 * time.Second); f.up.OpenConns() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an upstream connection outlived the client")
		}
	}
	waitNoneInFlight(t, f)
}
