package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
	"github.com/chorusrt/chorus/store"
)

// The console's sources are satisfied by a real cluster node.
var (
	_ Cluster        = (*cluster.Node)(nil)
	_ RemoteSessions = (*cluster.Sessions)(nil)
)

// TestConsoleOnClusterNode: a console over a real cluster member whose
// sessions are journaled in PostgreSQL: the list and the timeline come
// from the journal, the approval goes through the cluster's sessions, and
// the Cluster page places the session on the member holding its lease.
func TestConsoleOnClusterNode(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	s, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := store.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	addrs, err := cluster.LocalAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	var refunds atomic.Int64
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}}}`)
	n, err := cluster.Join(context.Background(), cluster.Config{Name: "consoletest", Bind: addrs[0], Peers: addrs,
		Runtime: []runtime.Option{runtime.WithProvider(s.Config())},
		Sessions: &session.Options{Journal: j, ModelName: "sim/echo", Tools: []session.Tool{{Def: llm.Tool{Name: "refund", Parameters: schema},
			Effect: session.EffectNonIdempotentWrite, Handler: func(ctx context.Context, c session.Call) (session.Result, error) {
				refunds.Add(1)
				return session.Result{Content: "refunded"}, nil
			}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitMembers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	owners := func() []BudgetOwner {
		var out []BudgetOwner
		for _, o := range n.BudgetOwners() {
			out = append(out, BudgetOwner{Provider: o.Provider, Fingerprint: o.KeyID, Member: o.Member})
		}
		return out
	}
	h, err := New(Options{Runtime: n.Runtime(), Cluster: n, BudgetOwners: owners, ClusterSessions: n.Sessions(), Journal: j, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	k := &kit{t: t, srv: srv}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/c-1/messages", body: SendRequest{Text: `refund {"order": 7}`}, bearer: testToken}); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	var ap ApprovalsView
	for deadline := time.Now().Add(30 * time.Second); len(ap.Approvals) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no approval pending")
		}
		k.do(req{path: APIPrefix + "approvals", bearer: testToken}).json(t, &ap)
	}
	var cv ClusterView
	r := k.do(req{path: APIPrefix + "cluster", bearer: testToken})
	r.json(t, &cv)
	if !cv.Enabled || len(cv.Placement) != 1 || cv.Placement[0].Session != "c-1" || cv.Placement[0].Member != n.Address() ||
		len(cv.BudgetOwners) != 1 || cv.BudgetOwners[0].Provider != "sim" || cv.BudgetOwners[0].Member != n.Address() || len(cv.BudgetOwners[0].Fingerprint) != 16 {
		t.Fatalf("cluster: %s", r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/c-1/approve", body: ResolveRequest{Interrupt: ap.Approvals[0].Interrupt}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/c-1/approve", body: ResolveRequest{Interrupt: ap.Approvals[0].Interrupt}, bearer: testToken}); r.status != http.StatusConflict || r.errCode(t) != "already_resolved" {
		t.Fatalf("second approval over the cluster: %d %s", r.status, r.body)
	}
	var sv SessionView
	for deadline := time.Now().Add(30 * time.Second); sv.LastStatus != "completed"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session did not finish: %+v", sv)
		}
		k.do(req{path: APIPrefix + "sessions/c-1", bearer: testToken}).json(t, &sv)
	}
	if refunds.Load() != 1 || len(sv.Timeline) == 0 || !strings.Contains(sv.Answer, "refunded") {
		t.Fatalf("refunds %d, session %+v", refunds.Load(), sv)
	}
	var list SessionsView
	k.do(req{path: APIPrefix + "sessions", bearer: testToken}).json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "c-1" {
		t.Fatalf("list: %+v", list)
	}
	// The Cluster page in a browser, captured (the README's screenshot).
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/c-2/messages", body: SendRequest{Text: `refund {"order": 8}`}, bearer: testToken}); r.status != http.StatusAccepted {
		t.Fatalf("send c-2: %d", r.status)
	}
	ctx := browser(t)
	plog := watchConsole(t, ctx)
	within(t, ctx, 20*time.Second, "login and cluster page",
		chromedp.Navigate(srv.URL+PagePrefix+"login?next=/console/cluster"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#budget-owners")),
	)
	waitText(t, ctx, "#placement", n.Address())
	waitText(t, ctx, "#budget-owners", n.Address())
	shoot(t, ctx, artifacts(t), "cluster")
	plog.clean(t, "login, cluster")
}
