package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

// remote is a Manager seen as RemoteSessions (what *cluster.Sessions is).
type remote struct{ m *session.Manager }

func (r remote) Send(ctx context.Context, id string, msg llm.Message) error {
	return r.m.Send(ctx, id, msg)
}
func (r remote) Resolve(ctx context.Context, id, in string, ok bool, why string) error {
	return r.m.Resolve(ctx, id, in, ok, why)
}
func (r remote) CancelTurn(ctx context.Context, id string) error { return r.m.CancelTurn(ctx, id) }
func (r remote) Snapshot(ctx context.Context, id string) (*session.Snapshot, error) {
	return r.m.Snapshot(ctx, id)
}
func (r remote) Events(ctx context.Context, id string, after uint64) (<-chan session.Event, func()) {
	return r.m.Events(id, after)
}

type fakeCluster struct{}

func (fakeCluster) Address() string   { return "127.0.0.1:7001" }
func (fakeCluster) Members() []string { return []string{"127.0.0.1:7001", "127.0.0.1:7003"} }

// TestClusterSources: on a cluster member the console lists sessions from
// the cluster's journal, reaches them through the cluster's sessions, and
// shows the members.
func TestClusterSources(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("cl1")
	if _, err := k.j.Acquire(ctxT(t, 10*time.Second), "cl1", "127.0.0.1:7003/act-1", time.Hour); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Runtime: k.rt, Cluster: fakeCluster{}, ClusterSessions: remote{k.m}, Journal: k.j, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	k.srv = srv
	var cv ClusterView
	r := k.do(req{path: APIPrefix + "cluster", bearer: testToken})
	r.json(t, &cv)
	if !cv.Enabled || cv.Address != "127.0.0.1:7001" || len(cv.Members) != 2 || len(cv.Sessions) != 1 || cv.Sessions[0] != "cl1" ||
		len(cv.Placement) != 1 || cv.Placement[0].Member != "127.0.0.1:7003" || cv.Placement[0].Session != "cl1" || cv.Placement[0].Expired {
		t.Fatalf("cluster: %s", r.body)
	}
	var sv SessionView
	r = k.do(req{path: APIPrefix + "sessions/cl1", bearer: testToken})
	r.json(t, &sv)
	if sv.State != StateWaitingApproval || len(sv.Timeline) == 0 {
		t.Fatalf("session: %s", r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/cl1/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	if res, err := k.m.Wait(ctxT(t, 15*time.Second), "cl1"); err != nil || res.Status != session.TurnCompleted {
		t.Fatalf("turn %+v %v", res, err)
	}
	if page := k.do(req{path: PagePrefix + "cluster", bearer: testToken}); page.status != 200 || !strings.Contains(string(page.body), "127.0.0.1:7003") {
		t.Fatalf("cluster page: %d", page.status)
	}
	if _, err := New(Options{Journal: k.j}); err == nil {
		t.Fatal("a journal without cluster sessions was accepted")
	}
}

// owner is the kit's current Manager seen as RemoteSessions: what
// *cluster.Sessions does, routing each call to the node that runs the
// session; a restart of the kit is a failover to another node.
type owner struct{ k *kit }

func (o owner) Send(ctx context.Context, id string, msg llm.Message) error {
	return o.k.m.Send(ctx, id, msg)
}
func (o owner) Resolve(ctx context.Context, id, in string, ok bool, why string) error {
	return o.k.m.Resolve(ctx, id, in, ok, why)
}
func (o owner) CancelTurn(ctx context.Context, id string) error { return o.k.m.CancelTurn(ctx, id) }
func (o owner) Snapshot(ctx context.Context, id string) (*session.Snapshot, error) {
	return o.k.m.Snapshot(ctx, id)
}
func (o owner) Events(ctx context.Context, id string, after uint64) (<-chan session.Event, func()) {
	return o.k.m.Events(id, after)
}

// TestClusterFailoverResume: on a cluster member, a session's stream ends
// when the node running the session is lost (no last event, so the page's
// EventSource reconnects), and resuming with the Last-Event-ID it had
// skips nothing of what the next node does: a gap, then the approval's
// resolution and the rest of the turn. The session's state is read from
// the cluster's journal meanwhile, without activating it anywhere.
func TestClusterFailoverResume(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("fo1")
	k.hopt = Options{Runtime: k.rt, Cluster: fakeCluster{}, ClusterSessions: owner{k}, Journal: k.j, Token: testToken}
	h, err := New(k.hopt)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	k.cur.Store(mux)
	s := k.openSSE(APIPrefix+"sessions/fo1/events", nil)
	var lastID string
	for {
		e := s.next(t)
		lastID = e.id
		if strings.Contains(e.data, `"type":"approval_requested"`) {
			break
		}
	}
	// The node running fo1 is lost; another takes over the journal.
	if err := k.m.Close(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	stop := time.AfterFunc(20*time.Second, s.cancel)
	_, err = s.r.ReadString(0)
	stop.Stop()
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the stream of a lost node: %v", err)
	}
	s.close()
	m2, err := session.New(k.mopt)
	if err != nil {
		t.Fatal(err)
	}
	k.m = m2
	var sv SessionView
	k.do(req{path: APIPrefix + "sessions/fo1", bearer: testToken}).json(t, &sv)
	if sv.State != StateWaitingApproval || !sv.Passive || len(sv.Approvals) != 1 {
		t.Fatalf("the session from the journal: %+v", sv.SessionSummary)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/fo1/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve on the next node: %d %s", r.status, r.body)
	}
	if _, err := k.m.Wait(ctxT(t, 15*time.Second), "fo1"); err != nil {
		t.Fatal(err)
	}
	types := k.resumeUntilTurnEnds(t, "fo1", lastID)
	if len(types) < 3 || types[0] != "gap" || types[1] != "approval_resolved" || k.refunds("fo1") != 1 {
		t.Fatalf("resumed on the next node with %q (%d refunds)", types, k.refunds("fo1"))
	}
}
