package cluster

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/faultproxy"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// viaProxy rewrites a PostgreSQL URL DSN to reach its server through p.
func viaProxy(t *testing.T, dsn string, p *faultproxy.Proxy) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("the test needs a postgres:// URL DSN to route through a proxy, got %q", dsn)
	}
	u.Host = p.Addr()
	return u.String()
}

// pgTarget is the host:port a URL DSN names.
func pgTarget(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("the test needs a postgres:// URL DSN, got %q", dsn)
	}
	return u.Host
}

// TestMemberPartitionedFromPostgres: three member processes share one
// PostgreSQL journal; one of them reaches it through a fault proxy. While
// its sessions' tools run (each turn a single-attempt refund and an
// idempotent note), that member loses PostgreSQL (the link goes silent,
// as when packets are dropped) for three lease lengths, keeping its links
// to the other members, then the link heals. The history is checked:
//   - every session finishes;
//   - no single-attempt write ran twice (the ledger the tools write), and
//     every refund record has one attempt at most, succeeded or
//     outcome_unknown, never repeated by the member that took over;
//   - the note, the response's second write, ran once the refund
//     succeeded and was skipped after an unknown one (checkSessionHistory).
func TestMemberPartitionedFromPostgres(t *testing.T) {
	runPostgresFault(t, 1, func(p *faultproxy.Proxy) { p.Partition() }, 3)
}

// TestPostgresDownLongerThanALease: every member reaches PostgreSQL
// through the proxy, and PostgreSQL goes away (connections reset, new ones
// refused) for two lease lengths under load, then comes back; the same
// history checks hold.
func TestPostgresDownLongerThanALease(t *testing.T) {
	runPostgresFault(t, 3, func(p *faultproxy.Proxy) { p.Reset() }, 2)
}

// TestSlowLinkToPostgres: one member's link to PostgreSQL takes 2 s each
// way (longer than its lease renewals may wait) for three lease lengths;
// the same history checks hold.
func TestSlowLinkToPostgres(t *testing.T) {
	runPostgresFault(t, 1, func(p *faultproxy.Proxy) { p.SetLatency(2*time.Second, 200*time.Millisecond) }, 3)
}

// runPostgresFault runs the scenario: behind members reach PostgreSQL
// through a fault proxy, fault is injected while the turns' tools run and
// healed after leases lease lengths.
func runPostgresFault(t *testing.T, behind int, fault func(*faultproxy.Proxy), leases int) {
	dsn := pgDSN(t)
	const ttl = 1500 * time.Millisecond
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetResponder(clusterResponder)
	proxy, err := faultproxy.Start(pgTarget(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	l := &ledger{path: filepath.Join(t.TempDir(), "ledger")}
	history := filepath.Join(t.TempDir(), "history")

	addrs := freeAddrs(t, 4)
	members, clientAddr := addrs[:3], addrs[3]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	specs := make([]childSpec, len(members))
	for i, a := range members {
		specs[i] = childSpec{Name: "partition", Bind: a, Peers: members, DSN: dsn, Provider: srv.OpenAIBaseURL(),
			Ledger: l.path, Pause: 2 * time.Second, LeaseTTL: ttl, History: history}
		if i < behind {
			specs[i].DSN = viaProxy(t, dsn, proxy)
		}
	}
	_, client := startMembers(t, ctx, specs, clientAddr)
	ss := client.Sessions()
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("part-%02d", i)
		if err := ss.Send(ctx, ids[i], llm.UserText("refund order 7")); err != nil {
			t.Fatalf("send %s: %v", ids[i], err)
		}
	}
	time.Sleep(time.Second) // the turns' tools are running
	holders := leaseHolders(t, dsn)
	t.Logf("lease holders before the partition: %v", holders)
	if holders[members[0]] == 0 {
		t.Fatalf("the member behind the proxy (%s) holds no session (holders %v): nothing would be tested", members[0], holders)
	}
	fault(proxy)
	time.Sleep(time.Duration(leases) * ttl)
	proxy.Heal()

	refunds, notes := checkSessionHistory(t, ctx, ss, ids, l)
	t.Logf("checked: %v", checkHistory(t, history, dsn))
	st := proxy.Stats()
	t.Logf("history: %d sessions, %d refunds, %d notes in the ledger checked; the proxy partitioned %d time(s), reset %d and refused %d connections, carried %d/%d bytes over %d",
		len(ids), refunds, notes, st.Partitions, st.Resets, st.Refused, st.BytesUp, st.BytesDown, st.Accepted)
}
