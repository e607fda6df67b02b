package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
)

// Run runs the conformance suite against the journal open returns.
//
// open(t) must return a journal over the storage that belongs to t: the first
// call for a given t starts from empty storage, and every later call with the
// same t opens the same storage again, whether or not the journals returned
// before are still open (the suite uses this to reopen after Close and to
// race two journals on one storage, as two processes would). open registers
// the journal's Close with t.Cleanup; the suite may close a journal first, so
// Close must accept a second call.
func Run(t *testing.T, open func(t *testing.T) store.Journal) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, func(*testing.T) store.Journal)
	}{
		{"RoundTrip", testRoundTrip},
		{"ContiguousSeqs", testContiguousSeqs},
		{"Conflict", testConflict},
		{"Validation", testValidation},
		{"EmptyAppend", testEmptyAppend},
		{"RaceSameExpectedSeq", testRaceSameExpectedSeq},
		{"ContendedWriters", testContendedWriters},
		{"ReadFrom", testReadFrom},
		{"Snapshots", testSnapshots},
		{"Sessions", testSessions},
		{"LargePayload", testLargePayload},
		{"ContextCanceled", testContextCanceled},
		{"CancelUnderLoad", testCancelUnderLoad},
		{"Reopen", testReopen},
		{"LeaseAcquire", testLeaseAcquire},
		{"LeaseEpochs", testLeaseEpochs},
		{"LeaseRenew", testLeaseRenew},
		{"LeaseRelease", testLeaseRelease},
		{"LeaseExpired", testLeaseExpired},
		{"LeaseAppend", testLeaseAppend},
		{"LeaseRace", testLeaseRace},
		{"LeasedAdapters", testLeasedAdapters},
		{"LeaseContext", testLeaseContext},
		{"LeaseReopen", testLeaseReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// rec is a record of the given kind with data as payload.
func rec(kind, data string) store.Record {
	return store.Record{Kind: kind, Data: []byte(data)}
}

// payload is the JSON payload the concurrency tests write: who wrote it and
// which of its attempts it was.
type payload struct {
	W int `json:"w"`
	I int `json:"i"`
	N int `json:"n,omitempty"` // position inside the append's batch
}

func (p payload) record(kind string) store.Record {
	b, _ := json.Marshal(p)
	return store.Record{Kind: kind, Data: b}
}

func decode(t *testing.T, r store.Record) payload {
	t.Helper()
	var p payload
	if err := json.Unmarshal(r.Data, &p); err != nil {
		t.Fatalf("record %d: payload %q: %v", r.Seq, r.Data, err)
	}
	return p
}

func mustAppend(t *testing.T, j store.Journal, session string, expected int64, recs ...store.Record) int64 {
	t.Helper()
	last, err := j.Append(t.Context(), session, expected, recs...)
	if err != nil {
		t.Fatalf("Append(%q, %d, %d records): %v", session, expected, len(recs), err)
	}
	if want := expected + int64(len(recs)); last != want {
		t.Fatalf("Append(%q, %d, %d records) = %d, want %d", session, expected, len(recs), last, want)
	}
	return last
}

func mustRead(t *testing.T, j store.Journal, session string, from int64) []store.Record {
	t.Helper()
	recs, err := j.Read(t.Context(), session, from)
	if err != nil {
		t.Fatalf("Read(%q, %d): %v", session, from, err)
	}
	return recs
}

func mustLastSeq(t *testing.T, j store.Journal, session string) int64 {
	t.Helper()
	n, err := j.LastSeq(t.Context(), session)
	if err != nil {
		t.Fatalf("LastSeq(%q): %v", session, err)
	}
	return n
}

// checkContiguous fails unless recs are session's records first, first+1, ...
func checkContiguous(t *testing.T, session string, recs []store.Record, first int64) {
	t.Helper()
	for i, r := range recs {
		if want := first + int64(i); r.Seq != want {
			t.Fatalf("record %d has seq %d, want %d (gap or duplicate)", i, r.Seq, want)
		}
		if r.Session != session {
			t.Fatalf("record %d has session %q, want %q", r.Seq, r.Session, session)
		}
	}
}

func testRoundTrip(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	in := []store.Record{
		{Kind: "user_message", Data: []byte(`{ "b":1,  "a" : [1,2] }`)}, // not canonical: stored as given
		{Kind: "model_result", Data: binary},                            // not even JSON: still stored as given
		{Kind: "tool_started", Data: nil},
		{Session: "s1", Seq: 99, At: time.Unix(1, 0), Kind: "tool_finished", Data: []byte(`{}`)}, // Seq and At are Append's to set
	}
	before := time.Now().UTC().Truncate(time.Microsecond)
	mustAppend(t, j, "s1", 0, in...)
	after := time.Now().UTC()
	in[0].Data[2] = 'X' // the journal must not alias the caller's buffer

	for _, from := range []int64{0, 1} {
		got := mustRead(t, j, "s1", from)
		if len(got) != len(in) {
			t.Fatalf("Read(from %d) returned %d records, want %d", from, len(got), len(in))
		}
		checkContiguous(t, "s1", got, 1)
		want := [][]byte{[]byte(`{ "b":1,  "a" : [1,2] }`), binary, {}, []byte(`{}`)}
		for i, r := range got {
			if r.Kind != in[i].Kind {
				t.Errorf("record %d kind %q, want %q", r.Seq, r.Kind, in[i].Kind)
			}
			if !bytes.Equal(r.Data, want[i]) {
				t.Errorf("record %d data %q, want %q", r.Seq, r.Data, want[i])
			}
			if r.At.Location() != time.UTC {
				t.Errorf("record %d At %v is not UTC", r.Seq, r.At)
			}
			if r.At.Before(before) || r.At.After(after) {
				t.Errorf("record %d At %v outside the Append call [%v, %v]", r.Seq, r.At, before, after)
			}
		}
		got[0].Data[0] = 'Y' // nor alias what Read handed out
	}
	if n := mustLastSeq(t, j, "s1"); n != 4 {
		t.Fatalf("LastSeq = %d, want 4", n)
	}
	first := mustRead(t, j, "s1", 1)
	mustAppend(t, j, "s1", 4, rec("user_message", `{"turn":2}`), rec("model_result", `{"text":"hi"}`))
	got := mustRead(t, j, "s1", 1)
	if len(got) != 6 {
		t.Fatalf("after a second append Read returned %d records, want 6", len(got))
	}
	checkContiguous(t, "s1", got, 1)
	if !slices.EqualFunc(got[:4], first, func(a, b store.Record) bool {
		return a.Seq == b.Seq && a.Kind == b.Kind && bytes.Equal(a.Data, b.Data) && a.At.Equal(b.At)
	}) {
		t.Fatalf("a later append changed earlier records")
	}
	if got[4].At.Before(got[3].At) {
		t.Errorf("second batch At %v is before the first batch's %v", got[4].At, got[3].At)
	}
	if string(got[5].Data) != `{"text":"hi"}` || got[5].Kind != "model_result" {
		t.Errorf("record 6 = %q %q", got[5].Kind, got[5].Data)
	}
}

func testContiguousSeqs(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	last := map[string]int64{}
	var kinds = map[string][]string{}
	for i := range 20 {
		s := []string{"alpha", "beta"}[i%2]
		n := 1 + i%4
		recs := make([]store.Record, n)
		for k := range recs {
			kind := fmt.Sprintf("k%d_%d", i, k)
			recs[k] = rec(kind, fmt.Sprintf(`{"i":%d,"k":%d}`, i, k))
			kinds[s] = append(kinds[s], kind)
		}
		last[s] = mustAppend(t, j, s, last[s], recs...)
	}
	for s, want := range kinds {
		got := mustRead(t, j, s, 0)
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", s, len(got), len(want))
		}
		checkContiguous(t, s, got, 1)
		for i, r := range got {
			if r.Kind != want[i] {
				t.Fatalf("%s: record %d kind %q, want %q (order lost)", s, r.Seq, r.Kind, want[i])
			}
		}
		if n := mustLastSeq(t, j, s); n != int64(len(want)) || n != last[s] {
			t.Fatalf("%s: LastSeq = %d, want %d", s, n, len(want))
		}
	}
}

func testConflict(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	mustAppend(t, j, "s", 0, rec("a", `1`), rec("b", `2`), rec("c", `3`))
	for _, tc := range []struct {
		name     string
		session  string
		expected int64
		want     int64 // LastSeq afterwards
	}{
		{"stale", "s", 2, 3},
		{"ahead", "s", 4, 3},
		{"new over existing", "s", 0, 3},
		{"existing over unknown", "unknown", 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := j.Append(t.Context(), tc.session, tc.expected, rec("x", `"lost"`), rec("y", `"lost"`))
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Append(%q, %d) = %d, %v; want ErrConflict", tc.session, tc.expected, n, err)
			}
			if got := mustLastSeq(t, j, tc.session); got != tc.want {
				t.Fatalf("LastSeq after conflict = %d, want %d", got, tc.want)
			}
			recs := mustRead(t, j, tc.session, 0)
			if len(recs) != int(tc.want) {
				t.Fatalf("conflicting append wrote: %d records, want %d", len(recs), tc.want)
			}
			for _, r := range recs {
				if string(r.Data) == `"lost"` {
					t.Fatalf("conflicting append wrote record %d", r.Seq)
				}
			}
		})
	}
	ids, err := j.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"s"}) {
		t.Fatalf("Sessions = %q after a conflicting append to an unknown session, want [s]", ids)
	}
}

func testValidation(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	mustAppend(t, j, "s", 0, rec("a", `1`), rec("b", `2`))
	long := strings.Repeat("x", store.MaxIDLen+1)
	ok := rec("ok", `{}`)
	appendCases := []struct {
		name     string
		session  string
		expected int64
		recs     []store.Record
		field    string
	}{
		{"empty session", "", 0, []store.Record{ok}, "session"},
		{"session with NUL", "a\x00b", 0, []store.Record{ok}, "session"},
		{"session not UTF-8", "a\xffb", 0, []store.Record{ok}, "session"},
		{"session too long", long, 0, []store.Record{ok}, "session"},
		{"negative expectedSeq", "s", -1, []store.Record{ok}, "expectedSeq"},
		{"empty kind mid-batch", "s", 2, []store.Record{ok, {Data: []byte(`{}`)}, ok}, "recs[1].Kind"},
		{"kind not UTF-8 last", "s", 2, []store.Record{ok, ok, {Kind: "\xc3", Data: []byte(`{}`)}}, "recs[2].Kind"},
		{"kind too long", "s", 2, []store.Record{{Kind: long}}, "recs[0].Kind"},
		{"record of another session", "s", 2, []store.Record{ok, {Session: "other", Kind: "k"}}, "recs[1].Session"},
		{"empty kind in a new session", "fresh", 0, []store.Record{ok, ok, {}}, "recs[2].Kind"},
	}
	for _, tc := range appendCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := j.Append(t.Context(), tc.session, tc.expected, tc.recs...)
			checkField(t, err, tc.field)
			if errors.Is(err, store.ErrConflict) {
				t.Fatalf("validation error also matches ErrConflict: %v", err)
			}
			if n := mustLastSeq(t, j, "s"); n != 2 {
				t.Fatalf("invalid batch moved LastSeq(s) to %d", n)
			}
			if recs := mustRead(t, j, "s", 0); len(recs) != 2 {
				t.Fatalf("invalid batch wrote: %d records", len(recs))
			}
			if n := mustLastSeq(t, j, "fresh"); n != 0 {
				t.Fatalf("invalid batch created session fresh (LastSeq %d)", n)
			}
		})
	}
	ctx := t.Context()
	otherCases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"Read empty session", func() error { _, err := j.Read(ctx, "", 0); return err }, "session"},
		{"LastSeq empty session", func() error { _, err := j.LastSeq(ctx, ""); return err }, "session"},
		{"SaveSnapshot empty session", func() error { return j.SaveSnapshot(ctx, "", 1, []byte(`{}`)) }, "session"},
		{"SaveSnapshot negative seq", func() error { return j.SaveSnapshot(ctx, "s", -1, []byte(`{}`)) }, "seq"},
		{"LoadSnapshot empty session", func() error { _, _, err := j.LoadSnapshot(ctx, ""); return err }, "session"},
	}
	for _, tc := range otherCases {
		t.Run(tc.name, func(t *testing.T) { checkField(t, tc.call(), tc.field) })
	}
	if _, _, err := j.LoadSnapshot(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invalid SaveSnapshot stored something: LoadSnapshot = %v", err)
	}
	// A record naming its own session is fine.
	mustAppend(t, j, "s", 2, store.Record{Session: "s", Kind: "k", Data: []byte(`{}`)})
}

func checkField(t *testing.T, err error, field string) {
	t.Helper()
	var ce *llm.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want *llm.ConfigError naming %q", err, err, field)
	}
	if ce.Field != field {
		t.Fatalf("ConfigError.Field = %q, want %q (%v)", ce.Field, field, err)
	}
}

func testEmptyAppend(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	ctx := t.Context()
	if n, err := j.Append(ctx, "s", 0); err != nil || n != 0 {
		t.Fatalf("Append(s, 0) with no records = %d, %v; want 0, nil", n, err)
	}
	if ids, err := j.Sessions(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("an empty append created a session: %q, %v", ids, err)
	}
	mustAppend(t, j, "s", 0, rec("a", `1`), rec("b", `2`))
	if n, err := j.Append(ctx, "s", 2); err != nil || n != 2 {
		t.Fatalf("Append(s, 2) with no records = %d, %v; want 2, nil", n, err)
	}
	if _, err := j.Append(ctx, "s", 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Append(s, 1) with no records on a session at 2 = %v, want ErrConflict", err)
	}
	if n := mustLastSeq(t, j, "s"); n != 2 {
		t.Fatalf("LastSeq = %d, want 2", n)
	}
}

// testRaceSameExpectedSeq starts writers on two journals over one storage at
// the same moment with the same expected seq: exactly one may win each round.
func testRaceSameExpectedSeq(t *testing.T, open func(*testing.T) store.Journal) {
	js := []store.Journal{open(t), open(t)}
	const writers, rounds, batch = 6, 5, 2
	var expected int64
	winners := make([]int, rounds)
	for round := range rounds {
		start := make(chan struct{})
		type result struct {
			w    int
			last int64
			err  error
		}
		results := make(chan result, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				recs := make([]store.Record, batch)
				for n := range recs {
					recs[n] = payload{W: w, I: round, N: n}.record("race")
				}
				<-start
				last, err := js[w%2].Append(t.Context(), "race", expected, recs...)
				results <- result{w, last, err}
			})
		}
		close(start)
		wg.Wait()
		close(results)
		won := -1
		for r := range results {
			switch {
			case r.err == nil:
				if won >= 0 {
					t.Fatalf("round %d: writers %d and %d both won", round, won, r.w)
				}
				if r.last != expected+batch {
					t.Fatalf("round %d: winner got last seq %d, want %d", round, r.last, expected+batch)
				}
				won = r.w
			case errors.Is(r.err, store.ErrConflict):
			default:
				t.Fatalf("round %d: writer %d: %v (want nil or ErrConflict)", round, r.w, r.err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		winners[round] = won
		expected += batch
	}
	got := mustRead(t, js[0], "race", 0)
	if len(got) != rounds*batch {
		t.Fatalf("%d records, want %d", len(got), rounds*batch)
	}
	checkContiguous(t, "race", got, 1)
	for i, r := range got {
		p := decode(t, r)
		if want := (payload{W: winners[i/batch], I: i / batch, N: i % batch}); p != want {
			t.Fatalf("record %d = %+v, want the round winner's %+v", r.Seq, p, want)
		}
	}
}

// testContendedWriters has writers on two journals append one record at a
// time to one session, retrying on conflict: every record lands exactly once,
// without a gap, each writer's in its own order.
func testContendedWriters(t *testing.T, open func(*testing.T) store.Journal) {
	js := []store.Journal{open(t), open(t)}
	const writers, each = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			j := js[w%2]
			ctx := t.Context()
			for i := 0; i < each; {
				last, err := j.LastSeq(ctx, "hot")
				if err != nil {
					errs <- err
					return
				}
				_, err = j.Append(ctx, "hot", last, payload{W: w, I: i}.record("step"))
				switch {
				case err == nil:
					i++
				case errors.Is(err, store.ErrConflict):
				default:
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustRead(t, js[1], "hot", 0)
	if len(got) != writers*each {
		t.Fatalf("%d records, want %d", len(got), writers*each)
	}
	checkContiguous(t, "hot", got, 1)
	next := make([]int, writers)
	for _, r := range got {
		p := decode(t, r)
		if p.W < 0 || p.W >= writers || p.I != next[p.W] {
			t.Fatalf("record %d = %+v: want writer %d's record %d next (duplicate or reordered)", r.Seq, p, p.W, next[max(0, min(p.W, writers-1))])
		}
		next[p.W]++
	}
}

func testReadFrom(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	for i := range 10 {
		mustAppend(t, j, "s", int64(i), rec("k", fmt.Sprint(i+1)))
	}
	mustAppend(t, j, "other", 0, rec("k", `"other"`))
	for _, tc := range []struct {
		from      int64
		n         int
		firstSeq  int64
		firstData string
	}{
		{-5, 10, 1, "1"},
		{0, 10, 1, "1"},
		{1, 10, 1, "1"},
		{4, 7, 4, "4"},
		{10, 1, 10, "10"},
		{11, 0, 0, ""},
		{1000, 0, 0, ""},
	} {
		got := mustRead(t, j, "s", tc.from)
		if len(got) != tc.n {
			t.Fatalf("Read(from %d) returned %d records, want %d", tc.from, len(got), tc.n)
		}
		if tc.n == 0 {
			continue
		}
		checkContiguous(t, "s", got, tc.firstSeq)
		if string(got[0].Data) != tc.firstData {
			t.Fatalf("Read(from %d) first record data %q, want %q", tc.from, got[0].Data, tc.firstData)
		}
	}
	if got := mustRead(t, j, "unknown", 0); len(got) != 0 {
		t.Fatalf("Read of an unknown session returned %d records", len(got))
	}
	if n := mustLastSeq(t, j, "unknown"); n != 0 {
		t.Fatalf("LastSeq of an unknown session = %d", n)
	}
}

func testSnapshots(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	ctx := t.Context()
	load := func(session string) (int64, string) {
		t.Helper()
		seq, data, err := j.LoadSnapshot(ctx, session)
		if err != nil {
			t.Fatalf("LoadSnapshot(%q): %v", session, err)
		}
		return seq, string(data)
	}
	save := func(session string, seq int64, data string) {
		t.Helper()
		if err := j.SaveSnapshot(ctx, session, seq, []byte(data)); err != nil {
			t.Fatalf("SaveSnapshot(%q, %d): %v", session, seq, err)
		}
	}
	if _, _, err := j.LoadSnapshot(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LoadSnapshot of a session without one = %v, want ErrNotFound", err)
	}
	steps := []struct {
		seq      int64
		data     string
		wantSeq  int64
		wantData string
	}{
		{2, `{"v":"a"}`, 2, `{"v":"a"}`},
		{5, `{"v":"b"}`, 5, `{"v":"b"}`},
		{3, `{"v":"older"}`, 5, `{"v":"b"}`},
		{0, `{"v":"zero"}`, 5, `{"v":"b"}`},
		{5, `{"v":"same seq, later"}`, 5, `{"v":"same seq, later"}`},
		{9, "\x00\xffbinary", 9, "\x00\xffbinary"},
	}
	for _, st := range steps {
		save("s", st.seq, st.data)
		if seq, data := load("s"); seq != st.wantSeq || data != st.wantData {
			t.Fatalf("after SaveSnapshot(%d, %q): LoadSnapshot = %d, %q; want %d, %q", st.seq, st.data, seq, data, st.wantSeq, st.wantData)
		}
	}
	save("t", 1, `{"v":"t"}`)
	if seq, data := load("s"); seq != 9 || data != "\x00\xffbinary" {
		t.Fatalf("another session's snapshot replaced this one: %d %q", seq, data)
	}
	if seq, data := load("t"); seq != 1 || data != `{"v":"t"}` {
		t.Fatalf("LoadSnapshot(t) = %d %q", seq, data)
	}
	buf := []byte(`{"v":"alias"}`)
	if err := j.SaveSnapshot(ctx, "u", 0, buf); err != nil {
		t.Fatal(err)
	}
	buf[2] = 'X'
	if _, data := load("u"); data != `{"v":"alias"}` {
		t.Fatalf("snapshot aliases the caller's buffer: %q", data)
	}
	if ids, err := j.Sessions(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("snapshots alone listed sessions %q (err %v); Sessions lists sessions with records", ids, err)
	}
}

func testSessions(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	ctx := t.Context()
	if ids, err := j.Sessions(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("Sessions of an empty journal = %q, %v", ids, err)
	}
	ids := []string{"b", "a", "B", "a-1", "é", "_x", "a 2", "Z"}
	for _, id := range ids {
		mustAppend(t, j, id, 0, rec("k", `{}`))
	}
	mustAppend(t, j, "b", 1, rec("k", `{}`)) // listed once however many records
	if err := j.SaveSnapshot(ctx, "snapshot-only", 1, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "conflict-only", 3, rec("k", `{}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Append to an unknown session at 3 = %v, want ErrConflict", err)
	}
	got, err := j.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids)
	slices.Sort(want) // bytewise, as Go sorts strings
	if !slices.Equal(got, want) {
		t.Fatalf("Sessions = %q, want %q", got, want)
	}
}

func testLargePayload(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	big := make([]byte, 1<<20)
	rand.Read(big)
	big2 := make([]byte, 1<<20)
	rand.Read(big2)
	mustAppend(t, j, "big", 0, rec("small", `{}`), store.Record{Kind: "big", Data: big}, store.Record{Kind: "big", Data: big2})
	got := mustRead(t, j, "big", 0)
	if len(got) != 3 {
		t.Fatalf("%d records, want 3", len(got))
	}
	if !bytes.Equal(got[1].Data, big) || !bytes.Equal(got[2].Data, big2) {
		t.Fatalf("1 MiB payloads did not round trip (lengths %d, %d)", len(got[1].Data), len(got[2].Data))
	}
	if err := j.SaveSnapshot(t.Context(), "big", 3, big); err != nil {
		t.Fatal(err)
	}
	seq, data, err := j.LoadSnapshot(t.Context(), "big")
	if err != nil || seq != 3 || !bytes.Equal(data, big) {
		t.Fatalf("1 MiB snapshot: seq %d, %d bytes, %v", seq, len(data), err)
	}
}

func testContextCanceled(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	mustAppend(t, j, "s", 0, rec("k", `1`))
	if err := j.SaveSnapshot(t.Context(), "s", 1, []byte(`"kept"`)); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		calls := map[string]func() error{
			"Append":       func() error { _, err := j.Append(c.ctx, "s", 1, rec("k", `"lost"`)); return err },
			"Append new":   func() error { _, err := j.Append(c.ctx, "new", 0, rec("k", `"lost"`)); return err },
			"Read":         func() error { _, err := j.Read(c.ctx, "s", 0); return err },
			"LastSeq":      func() error { _, err := j.LastSeq(c.ctx, "s"); return err },
			"SaveSnapshot": func() error { return j.SaveSnapshot(c.ctx, "s", 2, []byte(`"lost"`)) },
			"LoadSnapshot": func() error { _, _, err := j.LoadSnapshot(c.ctx, "s"); return err },
			"Sessions":     func() error { _, err := j.Sessions(c.ctx); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, c.want) {
				t.Errorf("%s with a done context = %v, want %v", name, err, c.want)
			}
		}
	}
	if n := mustLastSeq(t, j, "s"); n != 1 {
		t.Fatalf("a cancelled Append wrote: LastSeq %d", n)
	}
	if n := mustLastSeq(t, j, "new"); n != 0 {
		t.Fatalf("a cancelled Append wrote: LastSeq(new) %d", n)
	}
	if seq, data, err := j.LoadSnapshot(t.Context(), "s"); err != nil || seq != 1 || string(data) != `"kept"` {
		t.Fatalf("a cancelled SaveSnapshot wrote: %d %q %v", seq, data, err)
	}
}

// testCancelUnderLoad cancels writers in the middle of their appends: every
// acknowledged append is present at the seq it was given, the journal stays
// contiguous, and the only other records are those of appends that returned
// an error (their outcome is unknown to the caller).
func testCancelUnderLoad(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	const writers = 4
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type ack struct {
		p    payload
		last int64
	}
	var mu sync.Mutex
	var acked []ack
	unknown := map[payload]bool{}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				last, err := j.LastSeq(ctx, "load")
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("writer %d: LastSeq: %w", w, err)
					}
					return
				}
				p := payload{W: w, I: i}
				n, err := j.Append(ctx, "load", last, p.record("step"))
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, ack{p, n})
					if len(acked) == 12 {
						cancel()
					}
				case errors.Is(err, store.ErrConflict):
				case ctx.Err() != nil:
					unknown[p] = true
					if !errors.Is(err, context.Canceled) {
						errs <- fmt.Errorf("writer %d: Append after cancel = %w, want an error matching context.Canceled", w, err)
					}
				default:
					errs <- fmt.Errorf("writer %d: Append: %w", w, err)
				}
				mu.Unlock()
				if err != nil && !errors.Is(err, store.ErrConflict) {
					return
				}
			}
		})
	}
	timer := time.AfterFunc(10*time.Second, cancel)
	defer timer.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := ctx.Err(); err == nil {
		t.Fatal("writers stopped before the context was cancelled")
	}
	got := mustRead(t, j, "load", 0)
	checkContiguous(t, "load", got, 1)
	at := map[payload]int64{}
	for _, r := range got {
		p := decode(t, r)
		if _, dup := at[p]; dup {
			t.Fatalf("record %+v written twice", p)
		}
		at[p] = r.Seq
	}
	for _, a := range acked {
		if seq, ok := at[a.p]; !ok || seq != a.last {
			t.Fatalf("acknowledged append %+v at seq %d: found at %d (present %v)", a.p, a.last, seq, ok)
		}
	}
	for p := range at {
		if !unknown[p] && !slices.ContainsFunc(acked, func(a ack) bool { return a.p == p }) {
			t.Fatalf("record %+v is neither acknowledged nor from an append that failed", p)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no append was acknowledged before the cancellation")
	}
	t.Logf("%d acknowledged, %d cut off by the cancellation, %d of those written", len(acked), len(unknown), len(at)-len(acked))
}

func testReopen(t *testing.T, open func(*testing.T) store.Journal) {
	j := open(t)
	ctx := t.Context()
	mustAppend(t, j, "s", 0, rec("a", `{"n":1}`), rec("b", `{"n":2}`), rec("c", `{"n":3}`))
	mustAppend(t, j, "s", 3, rec("d", `{"n":4}`), rec("e", `{"n":5}`))
	mustAppend(t, j, "t", 0, rec("a", `{"t":1}`))
	if err := j.SaveSnapshot(ctx, "s", 4, []byte(`{"state":4}`)); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, j, "s", 0)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := j.Append(ctx, "s", 5, rec("f", `{}`)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := j.Read(ctx, "s", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Read after Close = %v, want ErrClosed", err)
	}

	j2 := open(t)
	after := mustRead(t, j2, "s", 0)
	if !slices.EqualFunc(before, after, func(a, b store.Record) bool {
		return a.Session == b.Session && a.Seq == b.Seq && a.Kind == b.Kind && bytes.Equal(a.Data, b.Data) && a.At.Equal(b.At)
	}) {
		t.Fatalf("records changed across Close/reopen:\nbefore %+v\nafter  %+v", before, after)
	}
	if n := mustLastSeq(t, j2, "s"); n != 5 {
		t.Fatalf("LastSeq after reopen = %d, want 5", n)
	}
	if seq, data, err := j2.LoadSnapshot(ctx, "s"); err != nil || seq != 4 || string(data) != `{"state":4}` {
		t.Fatalf("snapshot after reopen = %d %q %v", seq, data, err)
	}
	if ids, err := j2.Sessions(ctx); err != nil || !slices.Equal(ids, []string{"s", "t"}) {
		t.Fatalf("Sessions after reopen = %q %v", ids, err)
	}
	if _, err := j2.Append(ctx, "s", 4, rec("f", `{}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale append after reopen = %v, want ErrConflict", err)
	}
	mustAppend(t, j2, "s", 5, rec("f", `{"n":6}`))
}
