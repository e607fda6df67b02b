package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestCompaction: with a policy, the summary of older turns is written to
// the journal before the next turn's first model call, and from then on
// the model gets the summary instead of those turns; the turns stay in the
// history; no compaction happens within a turn.
func TestCompaction(t *testing.T) {
	h := newHarness(t, Options{
		Compaction: &CompactionPolicy{ContextWindowTokens: 100, TriggerRatio: 0.5, KeepTurns: 1},
		Tools:      []Tool{tool(nil, "lookup", EffectRead, ok(strings.Repeat("data ", 40)))},
	})
	h.srv.Push(llmtest.Text("alpha answer "+strings.Repeat("a", 120)),
		llmtest.Text("beta answer "+strings.Repeat("b", 120)),
		llmtest.Text("SUMMARY-1: the user asked about alpha"), // summary call, before turn 3
		llmtest.ToolCalls(call("c1", "lookup", `{}`)),
		llmtest.Text("gamma answer"))
	h.send("s", "tell me about alpha")
	h.wait("s")
	h.send("s", "tell me about beta")
	h.wait("s")
	if n := h.srv.Count(); n != 2 {
		t.Fatalf("%d requests before turn 3", n)
	}
	h.send("s", "tell me about gamma")
	if r := h.wait("s"); r.Answer != "gamma answer" {
		t.Fatalf("turn 3 = %+v", r)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5 (2 turns, 1 summary, 2 model steps)", len(reqs))
	}
	sum := parseRequest(t, reqs[2].Body)
	if len(sum.Tools) != 0 || sum.Messages[0].Role != "system" || !strings.Contains(sum.Messages[1].text(), "tell me about alpha") ||
		strings.Contains(sum.Messages[1].text(), "tell me about beta") {
		t.Fatalf("summary request = %+v", sum)
	}
	for i := 3; i < 5; i++ {
		body := string(reqs[i].Body)
		if !strings.Contains(body, "SUMMARY-1") || strings.Contains(body, "tell me about alpha") || !strings.Contains(body, "tell me about beta") {
			t.Fatalf("request %d after compaction: %s", i, body)
		}
	}
	// The summary record is durable before the turn that uses it starts.
	ks := kinds(h.records("s"))
	ci := strings.Index(strings.Join(ks, ","), recCompaction)
	ti := strings.LastIndex(strings.Join(ks, ","), recTurnStarted)
	if ci < 0 || ci > ti {
		t.Fatalf("journal kinds = %v", ks)
	}
	s := h.snap("s")
	if s.Summary != "SUMMARY-1: the user asked about alpha" || s.SummaryThrough != 1 {
		t.Fatalf("summary %q through %d", s.Summary, s.SummaryThrough)
	}
	if s.History[0].Content != "tell me about alpha" {
		t.Fatalf("history lost the compacted turn: %+v", s.History[0])
	}
}

// TestImagesByReference: images of user messages and tool results go to
// the media store; the journal holds references, never bytes; each model
// request carries the bytes.
func TestImagesByReference(t *testing.T) {
	userPNG := append([]byte("\x89PNG\r\n\x1a\nuser-image-"), bytes.Repeat([]byte{0xAB}, 64)...)
	toolPNG := append([]byte("\x89PNG\r\n\x1a\ntool-image-"), bytes.Repeat([]byte{0xCD}, 64)...)
	h := newHarness(t, Options{Tools: []Tool{tool(nil, "chart", EffectRead, func(context.Context, Call) (Result, error) {
		return Result{Content: "chart attached", Images: []llm.Part{llm.ImagePart("image/png", toolPNG)}}, nil
	})}})
	h.srv.Push(llmtest.ToolCalls(call("c1", "chart", `{}`)), llmtest.Text("I see two images"))
	msg := llm.Message{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImagePart("image/png", userPNG)}}
	if err := h.m.Send(ctx10(t), "s", msg); err != nil {
		t.Fatal(err)
	}
	h.wait("s")
	reqs := h.srv.Requests()
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	if !strings.Contains(string(reqs[0].Body), b64(userPNG)) {
		t.Fatal("first request lacks the user image bytes")
	}
	if !strings.Contains(string(reqs[1].Body), b64(userPNG)) || !strings.Contains(string(reqs[1].Body), b64(toolPNG)) {
		t.Fatal("second request lacks an image")
	}
	for _, r := range h.records("s") {
		for _, img := range [][]byte{userPNG, toolPNG} {
			if bytes.Contains(r.Data, img) || bytes.Contains(r.Data, []byte(b64(img))) || bytes.Contains(r.Data, img[8:20]) {
				t.Fatalf("record %d (%s) holds image bytes", r.Seq, r.Kind)
			}
		}
	}
	db, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, userPNG[8:20]) || bytes.Contains(db, toolPNG[8:20]) {
		t.Fatal("the journal file holds image bytes")
	}
	s := h.snap("s")
	u := s.History[0]
	if len(u.Parts) != 1 || !strings.HasPrefix(u.Parts[0].URL, MediaScheme) || len(u.Parts[0].Data) != 0 {
		t.Fatalf("stored user message = %+v", u)
	}
	if imgs := s.Tools[0].Images; len(imgs) != 1 || imgs[0].MIMEType != "image/png" || imgs[0].Size != int64(len(toolPNG)) {
		t.Fatalf("tool record images = %+v", imgs)
	}
	files, _ := os.ReadDir(filepath.Join(h.dir, "media"))
	if len(files) != 2 {
		t.Fatalf("media store holds %d files", len(files))
	}
	// A reference uploaded ahead of the message works the same way.
	ref, err := h.m.Media().Put(ctx10(t), "image/png", userPNG)
	if err != nil || ref.URI != u.Parts[0].URL {
		t.Fatalf("Put = %+v, %v (want the same content address)", ref, err)
	}
}

// TestLocalMedia checks the store's refusals.
func TestLocalMedia(t *testing.T) {
	ms := NewLocalMedia(t.TempDir())
	ctx := context.Background()
	if _, err := ms.Put(ctx, "image/png", nil); err == nil {
		t.Error("empty media accepted")
	}
	if _, err := ms.Put(ctx, "image/png", make([]byte, MaxMediaBytes+1)); err == nil {
		t.Error("oversize media accepted")
	}
	if _, err := ms.Get(ctx, MediaRef{URI: MediaScheme + "sha256/../../etc/passwd"}); err == nil {
		t.Error("path escape accepted")
	}
	ref, err := ms.Put(ctx, "image/gif", []byte("GIF89a"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ms.Get(ctx, ref); err != nil || string(b) != "GIF89a" {
		t.Fatalf("Get = %q, %v", b, err)
	}
}
