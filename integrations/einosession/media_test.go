package einosession_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// TestUserImage: a user's image reaches the agent's model as bytes in each
// model request (the one that calls a tool and the one that resumes),
// while the journal, eino's checkpoint in it included, holds only the
// media reference.
func TestUserImage(t *testing.T) {
	img := bytes.Repeat([]byte("\x89PNG-chart-"), 40)
	b64 := base64.StdEncoding.EncodeToString(img)
	dir := t.TempDir()
	media := session.NewLocalMedia(filepath.Join(dir, "media"))
	srv := llmtest.NewServer()
	defer srv.Close()
	c, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: "sk-test"},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := chorus.New(einosession.WithMedia(c, media), chorus.Config{Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Push(llmtest.ToolCalls(call("c1", "lookup_order", `{"order":7}`)), llmtest.Text("the chart shows order 7"))
	var l ledger
	rn := einosession.New()
	lookup := rn.Tool(orderTool(t, &l, "lookup_order", "delivered"), einosession.Effect(session.EffectRead))
	agent := chatAgent(t, "support", &scripted{srv: srv, cm: cm}, lookup)
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	opt, err := rn.Options(agent, session.Options{Journal: j, Media: media, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	ctx := ctxT(t)
	msg := llm.Message{Role: llm.RoleUser, Content: "what does this chart show?", Parts: []llm.Part{llm.ImagePart("image/png", img)}}
	if err := m.Send(ctx, "s", msg); err != nil {
		t.Fatal(err)
	}
	r, err := m.Wait(ctx, "s")
	if err != nil || r.Answer != "the chart shows order 7" {
		t.Fatalf("turn %+v %v", r, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, rq := range reqs {
		if !strings.Contains(string(rq.Body), b64) {
			t.Fatalf("model request %d lacks the image bytes: %s", i+1, rq.Body)
		}
		if strings.Contains(string(rq.Body), session.MediaScheme) {
			t.Fatalf("model request %d carries a media reference", i+1)
		}
	}
	recs, err := j.Read(ctx, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, rec := range recs {
		if bytes.Contains(rec.Data, img) || strings.Contains(string(rec.Data), b64) {
			t.Fatalf("journal record %d (%s) holds the image bytes", rec.Seq, rec.Kind)
		}
		if rec.Kind != "model_output" {
			continue
		}
		// The first output's state is eino's checkpoint: the reference, no bytes.
		var out struct {
			State []byte `json:"state"`
		}
		if err := json.Unmarshal(rec.Data, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.State) == 0 {
			continue
		}
		var st struct {
			Checkpoint []byte `json:"checkpoint"`
		}
		if err := json.Unmarshal(out.State, &st); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(st.Checkpoint, img) || bytes.Contains(st.Checkpoint, []byte(b64)) || !bytes.Contains(st.Checkpoint, []byte(session.MediaScheme)) {
			t.Fatalf("checkpoint holds the bytes, or not the reference")
		}
		refs++
	}
	if refs != 1 {
		t.Fatalf("%d checkpoints", refs)
	}
}
