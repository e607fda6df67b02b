//go:build partitions

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/faultproxy"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// TestPartitionSoak runs one cluster of three member processes under
// random faults, one after another, while waves of sessions (each turn a
// single-attempt refund and an idempotent note) and batches run: a member
// cut off from the others (then restarted: the split outlives the heal),
// a member's link to the others flapping (then restarted), a member cut
// off from PostgreSQL, PostgreSQL gone for every member, a member's link
// to PostgreSQL at 2 s each way, a member killed with SIGKILL (then
// restarted). Each fault lasts one to three lease lengths. At the end the
// whole history is checked: every session finished, no single-attempt
// write ran twice, every note ran exactly when its refund succeeded
// (checkSessionHistory); the lease and journal history is linearizable,
// one holder per (session, epoch), no journal gap (checkHistory); every
// batch custom_id answered once, a line that failed (its error counted in
// the report) being run again as `chorus batch --resume` would; no 429
// past the first window outside a split (a split's sides pace the key
// apart, up to twice its limit).
//
// Under make partitions it injects two faults. CHORUS_SOAK=30m makes it a soak of that
// long (make soak-partitions), CHORUS_SOAK_SEED picks the faults again, and
// CHORUS_SOAK_REPORT names a file for its report.
func TestPartitionSoak(t *testing.T) {
	soak, faults := time.Duration(0), 2
	if s := os.Getenv("CHORUS_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("CHORUS_SOAK=%q is not a duration", s)
		}
		soak, faults = d, 0
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHORUS_SOAK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHORUS_SOAK_SEED=%q is not a number", s)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 37))
	t.Logf("soak: seed %d (CHORUS_SOAK_SEED=%d repeats the faults' choice)", seed, seed)

	dsn := pgDSN(t)
	const window, limit = time.Second, 15
	const ttl = 1500 * time.Millisecond
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: window, Model: llmtest.SlidingWindow}))
	defer srv.Close()
	srv.SetResponder(clusterResponder)
	rec := newRecorder(srv.URL)
	defer rec.Close()
	dir := t.TempDir()
	l := &ledger{path: filepath.Join(dir, "ledger")}
	history := filepath.Join(dir, "history")

	addrs := freeAddrs(t, 4+6)
	members, clientAddr := addrs[:3], addrs[3]
	ctx, cancel := context.WithTimeout(context.Background(), soak+5*time.Minute)
	defer cancel()
	pg := make([]*faultproxy.Proxy, len(members))
	specs := make([]childSpec, len(members))
	for i, a := range members {
		p, err := faultproxy.Start(pgTarget(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pg[i] = p
		specs[i] = childSpec{Name: "soak", Bind: a, DSN: viaProxy(t, dsn, p), Provider: rec.URL + "/v1",
			Ledger: l.path, Pause: time.Second, LeaseTTL: ttl, History: history}
	}
	m := newMesh(t, members, addrs[4:], specs)
	children, client := startMembers(t, ctx, specs, clientAddr)
	ss := client.Sessions()
	restart := func(i int, kill bool) {
		if kill {
			children[i].kill()
		} else {
			children[i].stop(t)
		}
		children[i] = startChild(t, specs[i])
	}

	type span struct{ from, to time.Time }
	var splits []span // when a split's two budget owners may both pace the key
	injected := map[string]int{}
	resumed := map[string]int{} // batch lines run again, by the error that failed them
	var failedWaits []string
	var ids []string
	answers := map[string][]string{}
	var amu sync.Mutex
	start := time.Now()
	for wave := 0; faults > 0 && wave < faults || faults == 0 && time.Since(start) < soak; wave++ {
		var wids []string
		for i := range 6 {
			id := fmt.Sprintf("soak-%03d-%d", wave, i)
			if err := ss.Send(ctx, id, llm.UserText("refund order 7")); err != nil {
				t.Fatalf("wave %d: send %s: %v", wave, id, err)
			}
			wids = append(wids, id)
		}
		ids = append(ids, wids...)
		batchDone := make(chan map[string]error, 1)
		go func() {
			batchDone <- runSoakBatch(ctx, client, fmt.Sprintf("w%03d-", wave), 30, func(id, answer string) {
				amu.Lock()
				answers[id] = append(answers[id], answer)
				amu.Unlock()
			})
		}()
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond) // tools run
		i, hold := rng.IntN(len(members)), time.Duration(1+rng.IntN(3))*ttl
		kind := []string{"cut-member", "flap-member", "pg-partition", "pg-down", "pg-slow", "sigkill"}[rng.IntN(6)]
		injected[kind]++
		from := time.Now()
		switch kind {
		case "cut-member":
			m.isolate(i)
			time.Sleep(hold)
			m.healAll()
			restart(i, false)
			splits = append(splits, span{from, time.Now().Add(window)})
		case "flap-member":
			for end := time.Now().Add(hold); time.Now().Before(end); {
				m.isolate(i)
				time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
				m.healAll()
				time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			}
			restart(i, false)
			splits = append(splits, span{from, time.Now().Add(window)})
		case "pg-partition":
			pg[i].Partition()
			time.Sleep(hold)
			pg[i].Heal()
		case "pg-down":
			for _, p := range pg {
				p.Reset()
			}
			time.Sleep(hold)
			for _, p := range pg {
				p.Heal()
			}
		case "pg-slow":
			pg[i].SetLatency(2*time.Second, 200*time.Millisecond)
			time.Sleep(hold)
			pg[i].Heal()
		case "sigkill":
			restart(i, true)
		}
		t.Logf("wave %d: %s on %s for %v", wave, kind, members[i], time.Since(from).Round(100*time.Millisecond))
		for _, id := range wids {
			if _, err := ss.Wait(ctx, id); err != nil {
				// A failed wait is a call that failed: counted, and the
				// session waited for again at the end (checkSessionHistory).
				failedWaits = append(failedWaits, fmt.Sprintf("wave %d (%s): wait %s: %v", wave, kind, id, err))
				t.Logf("wave %d (%s): wait %s failed: %v", wave, kind, id, err)
			}
		}
		// A line that failed is run again, as `chorus batch --resume`
		// would: it must then be answered, once in all.
		for id, err := range <-batchDone {
			resumed[err.Error()]++
			t.Logf("wave %d (%s): batch line %s failed (%v): resumed", wave, kind, id, err)
			res, err := client.Chat(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("item " + id)}})
			if err != nil {
				t.Fatalf("wave %d (%s): batch line %s failed again on resume: %v", wave, kind, id, err)
			}
			amu.Lock()
			answers[id] = append(answers[id], res.Content)
			amu.Unlock()
		}
	}

	refunds, notes := checkSessionHistory(t, ctx, ss, ids, l)
	hist := checkHistory(t, history, dsn)
	for id, a := range answers {
		if len(a) != 1 || a[0] != "answer "+id {
			t.Errorf("custom_id %s answered %q", id, a)
		}
	}
	late, total := 0, 0
	rec.mu.Lock()
	for _, mk := range rec.marks {
		total++
		if mk.status != http.StatusTooManyRequests || mk.at.Sub(rec.marks[0].at) <= window {
			continue
		}
		inSplit := false
		for _, s := range splits {
			if !mk.at.Before(s.from) && !mk.at.After(s.to) {
				inSplit = true
			}
		}
		if !inSplit {
			late++
		}
	}
	rec.mu.Unlock()
	if late > 0 {
		t.Errorf("%d 429s past the first window outside a split: the cluster overran the key's limit", late)
	}
	for _, w := range failedWaits {
		t.Errorf("a session call failed: %s", w)
	}
	kinds := make([]string, 0, len(injected))
	nfaults := 0
	for k, n := range injected {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		nfaults += n
	}
	sort.Strings(kinds)
	var res []string
	nres := 0
	for e, n := range resumed {
		res = append(res, fmt.Sprintf("%d: %s", n, e))
		nres += n
	}
	sort.Strings(res)
	resText := "none"
	if nres > 0 {
		resText = fmt.Sprintf("%d (%s)", nres, strings.Join(res, "; "))
	}
	report := fmt.Sprintf("# Partition soak\n\nRun by `make soak-partitions` (TestPartitionSoak, cluster/soak_test.go): %v, seed %d, %d faults (%s).\n\n"+
		"Checked: %d sessions (%d refunds, %d notes in the ledger, no single-attempt write twice); %d batch custom_ids, each answered once; %d provider requests, %d 429s past the first window outside a split; %v.\n\n"+
		"Batch lines that failed and were run again (as --resume would): %s. Session waits that failed (each session waited for again at the end): %d.\n\nResult: %s.\n",
		time.Since(start).Round(time.Second), seed, nfaults, strings.Join(kinds, ", "),
		len(ids), refunds, notes, len(answers), total, late, hist, resText, len(failedWaits), map[bool]string{true: "violations found (see the test's output)", false: "no violation"}[t.Failed()])
	t.Log(report)
	if p := os.Getenv("CHORUS_SOAK_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// runSoakBatch runs items chat calls "item <prefix>b<i>" through the
// cluster, at most 8 at once, reports each answer, and returns the lines
// that failed, with their errors.
func runSoakBatch(ctx context.Context, n *Node, prefix string, items int, report func(id, answer string)) map[string]error {
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	failed := map[string]error{}
	var wg sync.WaitGroup
	for i := range items {
		id := prefix + fmt.Sprintf("b%03d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := n.Chat(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("item " + id)}})
			if err != nil {
				mu.Lock()
				failed[id] = err
				mu.Unlock()
				return
			}
			report(id, res.Content)
		}()
	}
	wg.Wait()
	return failed
}
