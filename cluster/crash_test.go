package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/runtime"
)

// TestClusterSurvivesSIGKILL runs three member processes and this process
// as a client, against one fake provider enforcing one key's limit, with
// sessions (each turn calls a non-idempotent and an idempotent tool) and
// a batch in flight; it kills the member that owns the key's budget (and
// holds sessions) with SIGKILL while tools run and batch items stream, and
// checks:
//   - every session finishes, on a survivor, and no single-attempt write
//     ran twice (ledger and journal agree: one attempt at most);
//   - the batch has exactly one answer per custom_id, the right one;
//   - the provider's 429s all fall in the first window, before the limit
//     was known: the nodes together never overran the key afterwards.
func TestClusterSurvivesSIGKILL(t *testing.T) {
	runSIGKILL(t, "crash", nil)
}

// TestClockSkewOfALease is TestClusterSurvivesSIGKILL with the members'
// clocks a lease's length apart (1.5 s behind, right, 1.5 s ahead, the
// victim's among them): the same checks hold, and the lease and journal
// history is linearizable. A lease's expiry is PostgreSQL's clock, not a
// member's; a member's clock matters only where its times reach another
// node (an admission's deadline, a cooldown's end, when a rate-limit
// reading was seen: budget.go) and where it waits for a lease to lapse.
func TestClockSkewOfALease(t *testing.T) {
	runSIGKILL(t, "skew", []time.Duration{-1500 * time.Millisecond, 0, 1500 * time.Millisecond})
}

// runSIGKILL runs the SIGKILL scenario with the members' clocks skewed
// by skews (nil: none).
func runSIGKILL(t *testing.T, name string, skews []time.Duration) {
	dsn := pgDSN(t)
	const window = time.Second
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 15, Window: window}))
	defer srv.Close()
	srv.SetResponder(clusterResponder)
	rec := newRecorder(srv.URL)
	defer rec.Close()
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	history := filepath.Join(t.TempDir(), "history")

	addrs := freeAddrs(t, 4)
	members, clientAddr := addrs[:3], addrs[3]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	specs := make([]childSpec, len(members))
	for i, a := range members {
		specs[i] = childSpec{Name: name, Bind: a, Peers: members, DSN: dsn, Provider: rec.URL + "/v1",
			Ledger: l.path, Pause: 3 * time.Second, LeaseTTL: 1500 * time.Millisecond, History: history}
		if skews != nil {
			specs[i].Skew = skews[i]
		}
	}
	children, client := startMembers(t, ctx, specs, clientAddr)

	// Sessions: each turn's tools pause 3s, so they run when the kill comes.
	ss := client.Sessions()
	ids := make([]string, 18)
	for i := range ids {
		ids[i] = fmt.Sprintf("crash-%02d", i)
		if err := ss.Send(ctx, ids[i], llm.UserText("refund order 7")); err != nil {
			t.Fatalf("send %s: %v", ids[i], err)
		}
	}
	// The batch: 60 items, 8 in flight, through the members in turn.
	const items = 60
	answers := make(map[string][]string)
	var amu sync.Mutex
	batchDone := make(chan error, 1)
	go func() {
		batchDone <- runTestBatch(ctx, client, items, func(id, answer string) {
			amu.Lock()
			answers[id] = append(answers[id], answer)
			amu.Unlock()
		})
	}()

	// Kill the member that owns the key's budget, mid-tool and mid-batch,
	// past the first window (the limit is known by then): the hardest
	// case, its sessions and the key's budget both move.
	time.Sleep(1600 * time.Millisecond)
	owner := budgetOwnerNode(t, client, "fake", "sk-cluster-shared")
	holders := leaseHolders(t, dsn)
	victim := -1
	for i, c := range children {
		if c.bind == owner {
			victim = i
		}
	}
	most := holders[owner]
	if victim < 0 || most == 0 {
		t.Fatalf("the budget owner %q is not a member holding sessions (holders %v): nothing would be tested", owner, holders)
	}
	amu.Lock()
	answered := len(answers)
	amu.Unlock()
	t.Logf("killing %s (the key's budget owner, clock %v off; holds %d of %d sessions; %d/%d batch items answered)", children[victim].bind, specs[victim].Skew, most, len(ids), answered, items)
	children[victim].kill()
	children[victim] = nil

	// Every session finishes on a survivor.
	refunds, notes := checkSessionHistory(t, ctx, ss, ids, l)
	t.Logf("ledger: %d refunds (interrupted ones end outcome_unknown), %d notes", refunds, notes)
	t.Logf("checked: %v", checkHistory(t, history, dsn))

	// The batch: one answer per custom_id.
	if err := <-batchDone; err != nil {
		t.Fatalf("batch: %v", err)
	}
	if len(answers) != items {
		t.Fatalf("batch answered %d custom_ids, want %d", len(answers), items)
	}
	for id, a := range answers {
		if len(a) != 1 || a[0] != "answer "+id {
			t.Fatalf("custom_id %s answered %q", id, a)
		}
	}

	n429, last, total := rec.limited()
	t.Logf("provider: %d answers, %d 429s, the last %v after the first answer", total, n429, last)
	if n429 > 0 && last > window {
		t.Fatalf("a 429 came %v after the first answer, past the first window (%v): the cluster overran the key's limit", last, window)
	}
}

// runTestBatch runs items chat calls "item <id>" through the cluster, at
// most 8 at once, and reports each answer once (Chat runs an item whose
// node was lost again).
func runTestBatch(ctx context.Context, n *Node, items int, report func(id, answer string)) error {
	return runTestBatchIDs(ctx, n, "", items, report)
}

// runTestBatchIDs is runTestBatch with custom_ids prefix+"b000"...
func runTestBatchIDs(ctx context.Context, n *Node, prefix string, items int, report func(id, answer string)) error {
	sem := make(chan struct{}, 8)
	errs := make(chan error, items)
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
				errs <- fmt.Errorf("%s: %w", id, err)
				return
			}
			report(id, res.Content)
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// budgetOwnerNode asks the budget owner of provider's key which node it
// runs on.
func budgetOwnerNode(t *testing.T, n *Node, provider, key string) string {
	sum := sha256.Sum256([]byte(key))
	id := budgetIdentity(runtime.Credential{Provider: provider, KeyID: hex.EncodeToString(sum[:8])})
	pid := n.grain(id, kindBudget)
	if pid == nil {
		t.Fatal("no budget owner")
	}
	r, err := request(n.sys, pid, &clusterpb.BudgetStatsRequest{}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*clusterpb.BudgetStats).Node
}

// leaseHolders counts the live session leases by node address.
func leaseHolders(t *testing.T, dsn string) map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT holder FROM chorus_journal_leases WHERE holder <> '' AND expires_at > now()")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		out[h[:strings.LastIndexByte(h, '/')]]++
	}
	return out
}
