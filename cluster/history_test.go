package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"

	"github.com/chorusrt/chorus/store"
)

// The journal's lease grants and fenced appends are checked for
// linearizability (porcupine) against a sequential model of one session's
// lease and journal: every member process records each Acquire, Renew,
// Release and AppendLeased it makes (invocation, completion, outcome) in
// one history file shared by the processes, and the test checks the file
// once the run is over. An operation a process never saw complete (killed
// by SIGKILL, or an error that says nothing of its outcome, such as a
// timeout while PostgreSQL was unreachable) may or may not have happened:
// it completes at the end of time, and the model allows both.

// histLine is one line of a history file: a call (Ret false) or the
// completion of the call with the same Proc and ID.
type histLine struct {
	Proc    string           `json:"p"`
	ID      uint64           `json:"i"`
	Ret     bool             `json:"r,omitempty"`
	At      int64            `json:"t"` // wall clock, ns: one machine's clock for every process
	Op      string           `json:"o,omitempty"`
	Session string           `json:"s,omitempty"`
	Holder  string           `json:"h,omitempty"`
	Epoch   int64            `json:"e,omitempty"`
	Seq     int64            `json:"q,omitempty"` // append: expected seq
	N       int64            `json:"n,omitempty"` // append: records
	Held    map[string]int64 `json:"held,omitempty"`
	// Completion:
	Out    string   `json:"out,omitempty"` // ok, held, lost, conflict, unknown
	Epoch2 int64    `json:"e2,omitempty"`  // acquire: epoch granted
	Seq2   int64    `json:"q2,omitempty"`  // append: new last seq
	Lost   []string `json:"lost,omitempty"`
}

// histJournal is a LeasingJournal that records its lease and fenced
// append operations in a history file.
type histJournal struct {
	store.LeasingJournal
	proc string
	mu   sync.Mutex
	f    *os.File
	next atomic.Uint64
}

func newHistJournal(j store.LeasingJournal, path, proc string) (*histJournal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &histJournal{LeasingJournal: j, proc: proc, f: f}, nil
}

func (h *histJournal) write(l histLine) {
	l.Proc, l.At = h.proc, time.Now().UnixNano()
	b, _ := json.Marshal(l)
	h.mu.Lock()
	_, _ = h.f.Write(append(b, '\n')) // one write per line: O_APPEND keeps lines whole
	h.mu.Unlock()
}

func (h *histJournal) call(l histLine) uint64 {
	l.ID = h.next.Add(1)
	h.write(l)
	return l.ID
}

func (h *histJournal) ret(id uint64, l histLine) {
	l.ID, l.Ret = id, true
	h.write(l)
}

// outcome names what err says of an operation's effect.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrLeaseHeld):
		return "held"
	case errors.Is(err, store.ErrLeaseLost):
		return "lost"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	}
	return "unknown"
}

func (h *histJournal) Acquire(ctx context.Context, session, holder string, ttl time.Duration) (store.Lease, error) {
	id := h.call(histLine{Op: "acquire", Session: session, Holder: holder})
	l, err := h.LeasingJournal.Acquire(ctx, session, holder, ttl)
	h.ret(id, histLine{Out: outcome(err), Epoch2: l.Epoch})
	return l, err
}

func (h *histJournal) Renew(ctx context.Context, holder string, ttl time.Duration, held map[string]int64) ([]string, error) {
	id := h.call(histLine{Op: "renew", Holder: holder, Held: held})
	lost, err := h.LeasingJournal.Renew(ctx, holder, ttl, held)
	h.ret(id, histLine{Out: outcome(err), Lost: lost})
	return lost, err
}

func (h *histJournal) Release(ctx context.Context, l store.Lease) error {
	id := h.call(histLine{Op: "release", Session: l.Session, Holder: l.Holder, Epoch: l.Epoch})
	err := h.LeasingJournal.Release(ctx, l)
	h.ret(id, histLine{Out: outcome(err)})
	return err
}

func (h *histJournal) AppendLeased(ctx context.Context, l store.Lease, expectedSeq int64, recs ...store.Record) (int64, error) {
	id := h.call(histLine{Op: "append", Session: l.Session, Holder: l.Holder, Epoch: l.Epoch, Seq: expectedSeq, N: int64(len(recs))})
	seq, err := h.LeasingJournal.AppendLeased(ctx, l, expectedSeq, recs...)
	h.ret(id, histLine{Out: outcome(err), Seq2: seq})
	return seq, err
}

func (h *histJournal) Close() error {
	h.f.Close()
	return h.LeasingJournal.Close()
}

// leaseState is the model's state of one session: its lease's holder
// ("" when released or never taken) and epoch, and its last seq.
type leaseState struct {
	Holder string
	Epoch  int64
	Seq    int64
}

// leaseInput is one session's operation; leaseOutput its outcome.
type leaseInput struct {
	Op, Session, Holder string
	Epoch, Seq, N       int64
}

type leaseOutput struct {
	Out          string
	Epoch2, Seq2 int64
}

// leaseStep is the sequential specification (store.Leaser): what each
// outcome allows, and the states after it. An unknown outcome allows the
// operation to have happened or not.
func leaseStep(st, in, out any) []any {
	s, i, o := st.(leaseState), in.(leaseInput), out.(leaseOutput)
	current := s.Holder != "" && s.Holder == i.Holder && s.Epoch == i.Epoch
	switch i.Op {
	case "acquire":
		granted := []any{leaseState{Holder: i.Holder, Epoch: s.Epoch + 1, Seq: s.Seq}}
		if s.Holder == i.Holder { // its own unexpired lease is extended at the same epoch
			granted = append(granted, leaseState{Holder: i.Holder, Epoch: s.Epoch, Seq: s.Seq})
		}
		switch o.Out {
		case "ok": // epoch+1 when free, expired or released; the same epoch for its own holder
			for _, g := range granted {
				if g.(leaseState).Epoch == o.Epoch2 {
					return []any{g}
				}
			}
			return nil
		case "held":
			if s.Holder != "" && s.Holder != i.Holder {
				return []any{s}
			}
			return nil
		case "unknown":
			return append(granted, s)
		}
	case "renew": // a renewal changes no holder or epoch: it only says whether it was still held
		switch o.Out {
		case "ok":
			if current {
				return []any{s}
			}
			return nil
		case "lost":
			if !current {
				return []any{s}
			}
			return nil
		case "unknown":
			return []any{s}
		}
	case "release":
		released := leaseState{Epoch: s.Epoch, Seq: s.Seq}
		switch {
		case !current:
			return []any{s} // a no-op
		case o.Out == "ok":
			return []any{released}
		case o.Out == "unknown":
			return []any{s, released}
		}
		return nil
	case "append":
		done := leaseState{Holder: s.Holder, Epoch: s.Epoch, Seq: s.Seq + i.N}
		switch o.Out {
		case "ok":
			if current && i.Seq == s.Seq && o.Seq2 == s.Seq+i.N {
				return []any{done}
			}
			return nil
		case "lost":
			if !current {
				return []any{s}
			}
			return nil
		case "conflict":
			if current && i.Seq != s.Seq {
				return []any{s}
			}
			return nil
		case "unknown":
			if current && i.Seq == s.Seq {
				return []any{s, done}
			}
			return []any{s}
		}
	}
	return nil
}

var leaseModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(leaseInput).Session
			if by[k] == nil {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{leaseState{}} },
	Step: leaseStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(leaseInput), out.(leaseOutput)
		return fmt.Sprintf("%s(%s e%d seq%d+%d) -> %s e%d seq%d", i.Op, i.Holder, i.Epoch, i.Seq, i.N, o.Out, o.Epoch2, o.Seq2)
	},
}

// historyStats is what a history check verified.
type historyStats struct {
	Ops, Unknown, Sessions, Grants, Appends int
}

func (s historyStats) String() string {
	return fmt.Sprintf("%d lease and journal operations over %d sessions (%d lease grants, %d fenced appends, %d of unknown outcome) linearizable; one holder per (session, epoch); no journal gap",
		s.Ops, s.Sessions, s.Grants, s.Appends, s.Unknown)
}

// readHistory turns a history file into porcupine operations, one per
// session an operation names (a Renew names each lease it renews).
func readHistory(t testing.TB, path string) []porcupine.Operation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type key struct {
		proc string
		id   uint64
	}
	calls := map[key]histLine{}
	rets := map[key]histLine{}
	var order []key
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l histLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line cut by SIGKILL mid-write
		}
		k := key{l.Proc, l.ID}
		if l.Ret {
			rets[k] = l
		} else {
			calls[k] = l
			order = append(order, k)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var ops []porcupine.Operation
	for _, k := range order {
		c := calls[k]
		r, done := rets[k]
		ret := int64(math.MaxInt64)
		if done {
			ret = r.At
		} else {
			r.Out = "unknown"
		}
		if done && r.Out == "unknown" {
			ret = math.MaxInt64 // it may take effect any time later
		}
		if c.Op == "renew" {
			lost := map[string]bool{}
			for _, s := range r.Lost {
				lost[s] = true
			}
			for s, e := range c.Held {
				out := r.Out
				if out == "ok" && lost[s] {
					out = "lost"
				}
				ops = append(ops, porcupine.Operation{Input: leaseInput{Op: "renew", Session: s, Holder: c.Holder, Epoch: e}, Call: c.At, Output: leaseOutput{Out: out}, Return: ret})
			}
			continue
		}
		ops = append(ops, porcupine.Operation{
			Input:  leaseInput{Op: c.Op, Session: c.Session, Holder: c.Holder, Epoch: c.Epoch, Seq: c.Seq, N: c.N},
			Call:   c.At,
			Output: leaseOutput{Out: r.Out, Epoch2: r.Epoch2, Seq2: r.Seq2},
			Return: ret,
		})
	}
	return ops
}

// checkHistory checks the history file at path: linearizable against the
// lease model, one holder per (session, epoch) granted, and every
// session's journal in PostgreSQL numbered 1..n without a gap.
func checkHistory(t *testing.T, path, dsn string) historyStats {
	t.Helper()
	ops := readHistory(t, path)
	var st historyStats
	sessions := map[string]bool{}
	grants := map[string]string{}
	for _, op := range ops {
		i, o := op.Input.(leaseInput), op.Output.(leaseOutput)
		sessions[i.Session] = true
		if o.Out == "unknown" {
			st.Unknown++
		}
		switch {
		case i.Op == "acquire" && o.Out == "ok":
			st.Grants++
			k := fmt.Sprintf("%s/%d", i.Session, o.Epoch2)
			if h, ok := grants[k]; ok && h != i.Holder {
				t.Errorf("session %s epoch %d granted to %s and to %s", i.Session, o.Epoch2, h, i.Holder)
			}
			grants[k] = i.Holder
		case i.Op == "append" && o.Out == "ok":
			st.Appends++
		}
	}
	st.Ops, st.Sessions = len(ops), len(sessions)
	if st.Grants == 0 || st.Appends == 0 {
		t.Fatalf("the history holds %d grants and %d appends: nothing was recorded", st.Grants, st.Appends)
	}
	res, info := porcupine.CheckOperationsVerbose(leaseModel.ToModel(), ops, time.Minute)
	switch res {
	case porcupine.Illegal:
		out := path + ".html"
		if err := porcupine.VisualizePath(leaseModel.ToModel(), info, out); err == nil {
			t.Logf("the history's visualization: %s", out)
		}
		t.Errorf("the lease and journal history is not linearizable (%d operations)", len(ops))
	case porcupine.Unknown:
		t.Errorf("porcupine could not decide the history in a minute (%d operations)", len(ops))
	}
	checkNoJournalGap(t, dsn)
	return st
}

// checkNoJournalGap checks that every session's records are numbered
// 1..n in PostgreSQL.
func checkNoJournalGap(t *testing.T, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT session, count(*), min(seq), max(seq) FROM chorus_journal_records GROUP BY session")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n, lo, hi int64
		if err := rows.Scan(&s, &n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if lo != 1 || hi != n {
			t.Errorf("session %s's journal has a gap: %d records numbered %d..%d", s, n, lo, hi)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// The lease model accepts a takeover after expiry and refuses the
// histories a broken fence would leave: a stale holder's append that
// succeeds after another holder took the lease, an epoch granted twice,
// an append that skips a seq. An operation of unknown outcome may have
// happened or not.
func TestLeaseModelFindsViolations(t *testing.T) {
	op := func(call, ret int64, in leaseInput, out leaseOutput) porcupine.Operation {
		in.Session = "s"
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	a1 := op(0, 1, leaseInput{Op: "acquire", Holder: "a"}, leaseOutput{Out: "ok", Epoch2: 1})
	ap1 := op(2, 3, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 0, N: 2}, leaseOutput{Out: "ok", Seq2: 2})
	b2 := op(4, 5, leaseInput{Op: "acquire", Holder: "b"}, leaseOutput{Out: "ok", Epoch2: 2})
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"takeover, the stale holder fenced", []porcupine.Operation{a1, ap1, b2,
			op(6, 7, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 2, N: 1}, leaseOutput{Out: "lost"}),
			op(8, 9, leaseInput{Op: "append", Holder: "b", Epoch: 2, Seq: 2, N: 1}, leaseOutput{Out: "ok", Seq2: 3}),
			op(10, 11, leaseInput{Op: "renew", Holder: "a", Epoch: 1}, leaseOutput{Out: "lost"}),
		}, porcupine.Ok},
		{"unknown append that happened", []porcupine.Operation{a1,
			op(2, math.MaxInt64, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 0, N: 2}, leaseOutput{Out: "unknown"}),
			op(4, 5, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 2, N: 1}, leaseOutput{Out: "ok", Seq2: 3}),
		}, porcupine.Ok},
		{"a stale holder's append succeeds", []porcupine.Operation{a1, ap1, b2,
			op(6, 7, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 2, N: 1}, leaseOutput{Out: "ok", Seq2: 3}),
		}, porcupine.Illegal},
		{"an epoch granted twice", []porcupine.Operation{a1,
			op(2, 3, leaseInput{Op: "acquire", Holder: "b"}, leaseOutput{Out: "ok", Epoch2: 1}),
		}, porcupine.Illegal},
		{"a seq skipped", []porcupine.Operation{a1, ap1,
			op(4, 5, leaseInput{Op: "append", Holder: "a", Epoch: 1, Seq: 3, N: 1}, leaseOutput{Out: "ok", Seq2: 4}),
		}, porcupine.Illegal},
		{"held while free", []porcupine.Operation{
			op(0, 1, leaseInput{Op: "acquire", Holder: "a"}, leaseOutput{Out: "held"}),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(leaseModel.ToModel(), c.ops, 10*time.Second); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
