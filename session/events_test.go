package session

import (
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestEventStreamBound: with no reader, or a reader that never reads, the
// session runs to the end; the stream keeps only the last EventBuffer
// events; a late reader gets a gap event counting what it missed, then the
// events held; a reader resumes after any seq it saw.
func TestEventStreamBound(t *testing.T) {
	const bound = 8
	h := newHarness(t, Options{EventBuffer: bound})
	deltas := make([]string, 100)
	for i := range deltas {
		deltas[i] = "x"
	}
	h.srv.Push(llmtest.Deltas(deltas...))
	stuck, stopStuck := h.m.Events("s", 0) // subscribed, never read
	h.send("s", "go")
	done := make(chan TurnResult, 1)
	go func() { r, _ := h.m.Wait(ctx10(t), "s"); done <- r }()
	select {
	case r := <-done:
		if r.Answer != strings.Repeat("x", 100) {
			t.Fatalf("answer = %q", r.Answer)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session waited for a reader")
	}
	stopStuck()
	if _, open := <-stuck; open {
		// The stuck reader may get one event it was blocked on; then closed.
		for range stuck {
		}
	}
	// turn_started, step_started, 100 deltas, turn_finished.
	// Numbers are the origin's and on: the 103rd is origin+102.
	const total = 103
	o := originOf(h.m, "s") - 1
	got := readUntil(h.m, "s", 0, func(ev Event) bool { return ev.Seq == o+total })
	if len(got) != bound+1 || got[0].Type != EventGap || got[0].Missed != total-bound {
		t.Fatalf("late reader got %d events, first %+v", len(got), got[0])
	}
	for i, ev := range got[1:] {
		if ev.Seq != o+uint64(total-bound+1+i) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	if last := got[len(got)-1]; last.Type != EventTurnFinished || last.TurnStatus != TurnCompleted {
		t.Fatalf("last event %+v", last)
	}
	// Resume after seq total-3: exactly the last three, no gap.
	resumed := readUntil(h.m, "s", o+total-3, func(ev Event) bool { return ev.Seq == o+total })
	if len(resumed) != 3 || resumed[0].Seq != o+total-2 {
		t.Fatalf("resumed %d events, from seq %d", len(resumed), resumed[0].Seq)
	}
}

// TestEventsTagged: every event carries its turn, step and attempt; tool
// events name the call and its effect.
func TestEventsTagged(t *testing.T) {
	h := newHarness(t, Options{Tools: []Tool{tool(nil, "lookup", EffectRead, ok("x")), tool(nil, "refund", EffectNonIdempotentWrite, ok("r"))}})
	h.srv.Push(llmtest.Respond(llmtest.Reply{Reasoning: "thinking", ToolCalls: []llm.ToolCall{call("c1", "lookup", `{}`), call("c2", "refund", `{}`)}}), llmtest.Text("done"))
	evs := collect(h.m, "s")
	h.send("s", "go")
	p := h.pending("s", 1)[0]
	if err := h.m.Resolve(ctx10(t), "s", p.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	h.wait("s")
	until(t, "turn_finished event", func() bool {
		e := evs.events()
		return len(e) > 0 && e[len(e)-1].Type == EventTurnFinished
	})
	got := evs.close()
	seen := map[EventType]int{}
	for _, e := range got {
		seen[e.Type]++
		if e.Turn != 1 || e.Session != "s" {
			t.Errorf("event %+v", e)
		}
		switch e.Type {
		case EventTextDelta, EventReasoningDelta:
			if e.Step == 0 || e.Attempt != 1 || e.StepKind != StepRunModel {
				t.Errorf("delta %+v", e)
			}
		case EventToolCallStarted, EventToolCallFinished:
			if e.Step == 0 || e.Attempt != 1 || e.CallID == "" || e.Effect == "" || e.StepKind != StepCallTool {
				t.Errorf("tool event %+v", e)
			}
		}
	}
	for _, typ := range []EventType{EventTurnStarted, EventStepStarted, EventReasoningDelta, EventTextDelta, EventToolCallStarted,
		EventToolCallFinished, EventApprovalRequested, EventApprovalResolved, EventTurnFinished} {
		if seen[typ] == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	if seen[EventToolCallStarted] != 2 || seen[EventToolCallFinished] != 2 {
		t.Errorf("tool events: %v", seen)
	}
}

// TestEventStreamByteBound: the stream is bounded in bytes too (10 MiB by
// default): huge deltas push the oldest events out, oldest first, as the
// count bound does; the newest event is always held.
func TestEventStreamByteBound(t *testing.T) {
	l := newEventLog(DefaultEventBuffer, DefaultEventBufferBytes, 1, 1)
	big := strings.Repeat("x", 4<<20)
	for range 5 {
		l.publish(Event{Type: EventTextDelta, Text: big})
	}
	lh := l.since(0, nil)
	if held, missed := lh.events, lh.missed; len(held) != 2 || missed != 3 || held[0].Seq != 4 || held[1].Seq != 5 {
		t.Fatalf("after five 4 MiB deltas: %d held, %d missed, first seq %d; want the last 2 held, 3 missed", len(held), missed, held[0].Seq)
	}
	if l.bytes > DefaultEventBufferBytes {
		t.Fatalf("%d bytes held, bound %d", l.bytes, DefaultEventBufferBytes)
	}
	huge := strings.Repeat("y", DefaultEventBufferBytes+1)
	l.publish(Event{Type: EventTextDelta, Text: huge})
	if lh = l.since(0, lh.events); len(lh.events) != 1 || lh.events[0].Seq != 6 || lh.missed != 5 {
		t.Fatalf("after a delta past the bound: %d held, %d missed", len(lh.events), lh.missed)
	}
	l.publish(Event{Type: EventTurnFinished})
	if lh = l.since(0, lh.events); len(lh.events) != 1 || lh.events[0].Seq != 7 {
		t.Fatalf("after a small event: %d held", len(lh.events))
	}

	// Through a session, with a smaller bound: a late reader gets a gap,
	// then only as many bytes of events as the bound allows, ending with
	// turn_finished.
	const bound = 1 << 20
	h := newHarness(t, Options{EventBufferBytes: bound})
	deltas := make([]string, 6)
	for i := range deltas {
		deltas[i] = strings.Repeat(string(rune('a'+i)), 300_000)
	}
	h.srv.Push(llmtest.Deltas(deltas...))
	h.send("s", "go")
	if r := h.wait("s"); r.Answer != strings.Join(deltas, "") {
		t.Fatalf("answer of %d bytes", len(r.Answer))
	}
	got := readUntil(h.m, "s", 0, func(ev Event) bool { return ev.Type == EventTurnFinished })
	if len(got) < 2 || got[0].Type != EventGap {
		t.Fatalf("late reader got %d events, first %+v; want a gap first", len(got), got[0].Type)
	}
	size := 0
	for _, ev := range got[1:] {
		size += eventSize(&ev)
	}
	// turn_started, step_started, 6 deltas, turn_finished: 3 deltas fit.
	if size > bound || len(got[1:]) != 4 || got[0].Missed != 5 || got[1].Text != deltas[3] {
		t.Fatalf("held %d events of %d bytes after a gap of %d; want 4 (the last 3 deltas and turn_finished) within %d", len(got[1:]), size, got[0].Missed, bound)
	}
}

// readUntil reads a session's events with Seq > after up to the one last
// accepts, then stops reading.
func readUntil(m *Manager, id string, after uint64, last func(Event) bool) []Event {
	ch, stop := m.Events(id, after)
	defer stop()
	var got []Event
	for ev := range ch {
		got = append(got, ev)
		if last(ev) {
			break
		}
	}
	return got
}

// originOf is where the session's event numbering began in this process.
func originOf(m *Manager, id string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.logs[id]; l != nil {
		return l.origin
	}
	return m.seqs[id].origin
}

// TestEventsResumeAcrossRestart: a reader that resumes after the last
// number an earlier process gave (a restart, or another cluster node
// taking the session over) skips nothing: the new process numbers above
// it, and the reader gets a gap first, then every event held, the new
// turn's from its start. So does a reader with a number this process
// never gave (a node whose clock ran ahead).
func TestEventsResumeAcrossRestart(t *testing.T) {
	h := newHarness(t, Options{})
	h.srv.Push(llmtest.Text("one"))
	h.send("s", "first")
	h.wait("s")
	first := readUntil(h.m, "s", 0, func(ev Event) bool { return ev.Type == EventTurnFinished })
	last := first[len(first)-1].Seq

	h.restart()
	h.srv.Push(llmtest.Text("two"))
	h.send("s", "second")
	h.wait("s")
	for _, after := range []uint64{last, last + 1_000_000_000_000} {
		got := readUntil(h.m, "s", after, func(ev Event) bool { return ev.Type == EventTurnFinished })
		if len(got) < 3 || got[0].Type != EventGap || got[1].Type != EventTurnStarted || got[1].Turn != 2 || got[1].Seq <= last {
			t.Fatalf("resuming after %d (the last event before the restart: %d): %+v", after, last, got)
		}
		if got[0].Seq != got[1].Seq-1 || got[0].Missed != 0 {
			t.Fatalf("gap %+v before %+v", got[0], got[1])
		}
	}
	// A reader of this numbering resumes as before, without a gap.
	got := readUntil(h.m, "s", 0, func(ev Event) bool { return ev.Type == EventTurnFinished })
	again := readUntil(h.m, "s", got[0].Seq, func(ev Event) bool { return ev.Type == EventTurnFinished })
	if len(again) != len(got)-1 || again[0].Seq != got[1].Seq {
		t.Fatalf("resuming after %d: %d events from %d; want %d from %d", got[0].Seq, len(again), again[0].Seq, len(got)-1, got[1].Seq)
	}
}

// TestEventLogForeignNumbers: since treats a number below the numbering's
// origin, or at or above the next one, as another numbering's: every event
// held, flagged.
func TestEventLogForeignNumbers(t *testing.T) {
	l := newEventLog(2, DefaultEventBufferBytes, 1000, 1000)
	for range 3 {
		l.publish(Event{Type: EventTextDelta})
	}
	for _, c := range []struct {
		after   uint64
		foreign bool
		missed  uint64
		first   uint64
	}{
		{0, false, 1, 1001},
		{5, true, 1, 1001},
		{999, false, 1, 1001}, // origin-1: from the start, as 0
		{1000, false, 0, 1001},
		{1001, false, 0, 1002},
		{1002, false, 0, 0},
		{1003, true, 1, 1001},
		{1 << 60, true, 1, 1001},
	} {
		h := l.since(c.after, nil)
		first := uint64(0)
		if len(h.events) > 0 {
			first = h.events[0].Seq
		}
		if h.foreign != c.foreign || h.missed != c.missed || first != c.first || (first != 0 && h.before != first-1) {
			t.Errorf("since(%d): foreign %v, missed %d, first %d, before %d; want %v, %d, %d", c.after, h.foreign, h.missed, first, h.before, c.foreign, c.missed, c.first)
		}
	}
}
