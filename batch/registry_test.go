package batch

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// TestRegistry: a tracked job's progress reaches the registry as it runs:
// counts, tokens, the per-model summary with its cost, bad lines, and the
// end; the registry keeps only the last finished jobs.
func TestRegistry(t *testing.T) {
	reg := NewRegistry(1)
	lines := []string{
		chatLine("a", "openai/m1", "hi"),
		chatLine("b", "openai/m1", "fail me"),
		chatLine("c", "openai/m2", "yo"),
		`{"custom_id": "d", "method": "POST"`,
	}
	out, err := OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), Create)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr := reg.Track("in.jsonl", len(lines))
	if p, ok := reg.Job(tr.ID()); !ok || !p.Running() || p.Total != 4 || p.Name != "in.jsonl" {
		t.Fatalf("before the run: %+v %v", p, ok)
	}
	prices := &Prices{Models: llm.Prices{"openai/m1": {Input: 1, Output: 2}}}
	_, err = Run(context.Background(), Job{Input: strings.NewReader(strings.Join(lines, "\n") + "\n"), Output: out,
		Runner: &fakeRunner{}, Observe: tr.Observe, Prices: prices, Concurrency: 1})
	tr.Finish(err)
	p, ok := reg.Job(tr.ID())
	if !ok || p.Running() || p.Done != 4 || p.Succeeded != 2 || p.Failed != 2 || p.Bad != 1 || len(p.BadLines) != 1 {
		t.Fatalf("after the run: %+v", p)
	}
	if p.Priced != 1 || p.Cost.USD <= 0 || p.Tokens == 0 {
		t.Fatalf("cost and tokens: %+v", p)
	}
	if len(p.Models) != 2 || p.Models[0].Model != "openai/m1" || p.Models[0].Requests != 2 || p.Models[0].Failed != 1 || p.Models[0].Priced != 1 || p.Models[1].Priced != 0 {
		t.Fatalf("models: %+v", p.Models)
	}
	if p.BadLines[0].Line != 4 || p.BadLines[0].Error == "" {
		t.Fatalf("bad line: %+v", p.BadLines[0])
	}
	if _, ok := p.ETA(time.Now()); ok {
		t.Fatal("a finished job has an ETA")
	}
	// A running job's rate and ETA.
	run := Progress{Total: 10, Done: 5, Started: time.Now().Add(-5 * time.Second)}
	if eta, ok := run.ETA(run.Started.Add(5 * time.Second)); !ok || eta != 5*time.Second || run.Rate(run.Started.Add(5*time.Second)) != 1 {
		t.Fatalf("eta %v %v", eta, ok)
	}
	// Keep 1: a second finished job pushes the first out; a running one stays.
	t2 := reg.Track("second", 0)
	t3 := reg.Track("third", 0)
	t2.Finish(nil)
	jobs := reg.Jobs()
	if len(jobs) != 2 || jobs[0].ID != t2.ID() || jobs[1].ID != t3.ID() || !jobs[1].Running() {
		t.Fatalf("jobs: %+v", jobs)
	}
}
