package console

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct{ id, event, data string }

// sseStream reads events from a console stream.
type sseStream struct {
	res    *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

func (k *kit) openSSE(path string, header map[string]string) *sseStream {
	k.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.srv.URL+path, nil)
	r.Header.Set("Authorization", "Bearer "+testToken)
	for h, v := range header {
		r.Header.Set(h, v)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		cancel()
		k.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		res.Body.Close()
		k.t.Fatalf("stream %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{res: res, r: bufio.NewReader(res.Body), cancel: cancel}
	k.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next event (comments skipped).
func (s *sseStream) next(t testing.TB) sseEvent {
	t.Helper()
	var ev sseEvent
	timer := time.AfterFunc(20*time.Second, s.cancel)
	defer timer.Stop()
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[6:]
		}
	}
}

func TestCredentialsAPI(t *testing.T) {
	k := newKit(t, kitOpts{sim: sim.Options{RPM: 1000}})
	if r := k.do(req{path: APIPrefix + "credentials"}); r.status != http.StatusUnauthorized || r.errCode(t) != "unauthorized" {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	if r := k.do(req{path: APIPrefix + "credentials", bearer: "wrong"}); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", r.status)
	}
	if _, err := k.rt.Chat(ctxT(t, 10*time.Second), &llm.ChatRequest{Model: "sim/echo", Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	r := k.do(req{path: APIPrefix + "credentials", bearer: testToken})
	var v CredentialsView
	r.json(t, &v)
	if r.status != 200 || len(v.Credentials) != 1 {
		t.Fatalf("credentials: %d %s", r.status, r.body)
	}
	c := v.Credentials[0]
	if c.Provider != "sim" || len(c.Fingerprint) != 16 || c.Requests != 1 || c.LimitRequests != 1000 || c.RemainingRequests < 0 || c.RemainingRequests >= 1000 {
		t.Fatalf("credential: %+v", c)
	}
	if len(v.Providers) != 1 || v.Providers[0] != "sim" {
		t.Fatalf("providers %q", v.Providers)
	}
	if len(v.Aliases) != 1 || v.Aliases[0].Name != "fast" || v.Aliases[0].Serving != 0 || v.Aliases[0].ServingTarget != "sim/echo" {
		t.Fatalf("aliases: %+v", v.Aliases)
	}
	if p := k.do(req{path: PagePrefix + "credentials", bearer: testToken}); !bytes.Contains(p.body, []byte("sim/echo (step 0)")) {
		t.Fatalf("the credentials page does not say which step serves fast: %s", p.body)
	}
}

// TestAliasServingStep: an alias is served by its first target whose
// provider has a credential not cooling down; with every target's
// credentials cooling down, by none.
func TestAliasServingStep(t *testing.T) {
	soon := time.Now().Add(time.Minute)
	aliases := map[string][]string{"b": {"openai/gpt", "anthropic/claude", "gemini/flash"}, "a": {"gemini/flash"}}
	for _, c := range []struct {
		cooling []string // providers whose every credential cools down
		b       int
		a       int
	}{
		{nil, 0, 0},
		{[]string{"openai"}, 1, 0},
		{[]string{"openai", "anthropic"}, 2, 0},
		{[]string{"openai", "anthropic", "gemini"}, -1, -1},
	} {
		var creds []CredentialView
		for _, p := range []string{"openai", "anthropic", "gemini"} {
			for i := range 2 {
				cv := CredentialView{Provider: p, Credential: i}
				if slices.Contains(c.cooling, p) {
					cv.CooldownUntil = &soon
				}
				creds = append(creds, cv)
			}
		}
		// One cooling key of a provider does not make it fall back.
		creds[0].CooldownUntil = &soon
		got := aliasViews(aliases, creds)
		if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].Serving != c.b || got[0].Serving != c.a {
			t.Fatalf("cooling %q: %+v", c.cooling, got)
		}
		if c.b >= 0 && got[1].ServingTarget != aliases["b"][c.b] || c.b < 0 && got[1].ServingTarget != "" {
			t.Fatalf("cooling %q: serving target %q", c.cooling, got[1].ServingTarget)
		}
	}
}

func TestCredentialsStreamTicks(t *testing.T) {
	k := newKit(t, kitOpts{})
	s := k.openSSE(APIPrefix+"credentials/stream", nil)
	e1 := s.next(t)
	if _, err := k.rt.Chat(ctxT(t, 10*time.Second), &llm.ChatRequest{Model: "sim/echo", Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	var last CredentialsView
	for i := 0; i < 50; i++ {
		e := s.next(t)
		if e.event != "credentials" {
			t.Fatalf("event %q", e.event)
		}
		if err := jsonUnmarshal(e.data, &last); err != nil {
			t.Fatal(err)
		}
		if len(last.Credentials) == 1 && last.Credentials[0].Requests == 1 {
			n1, _ := strconv.Atoi(e1.id)
			n, _ := strconv.Atoi(e.id)
			if n <= n1 {
				t.Fatalf("ids %s then %s", e1.id, e.id)
			}
			return
		}
	}
	t.Fatalf("the stream never showed the request: %+v", last)
}

func TestBatchesAPI(t *testing.T) {
	k := newKit(t, kitOpts{})
	tr := k.reg.Track("in.jsonl", 4)
	tr.Observe(batch.Event{Kind: batch.EventDone, Model: "sim/echo", Tokens: 7})
	tr.Observe(batch.Event{Kind: batch.EventBadLine, Line: 2, Err: errors.New("line 2: $.body: <b>bad</b>")})
	tr.Observe(batch.Event{Kind: batch.EventDone, Failed: true})
	var v BatchesView
	r := k.do(req{path: APIPrefix + "batches", bearer: testToken})
	r.json(t, &v)
	if r.status != 200 || len(v.Jobs) != 1 {
		t.Fatalf("batches: %d %s", r.status, r.body)
	}
	j := v.Jobs[0]
	if !j.Running || j.Done != 2 || j.Total != 4 || j.Percent != 50 || j.Bad != 1 || len(j.BadLines) != 1 || len(j.Models) != 1 || j.Models[0].Tokens != 7 || j.CostUSD != nil {
		t.Fatalf("job: %+v", j)
	}
	var one BatchView
	r = k.do(req{path: APIPrefix + "batches/" + tr.ID(), bearer: testToken})
	r.json(t, &one)
	if r.status != 200 || one.ID != tr.ID() {
		t.Fatalf("one job: %d %s", r.status, r.body)
	}
	if r := k.do(req{path: APIPrefix + "batches/job-99", bearer: testToken}); r.status != 404 {
		t.Fatalf("unknown job: %d", r.status)
	}
	s := k.openSSE(APIPrefix+"batches/stream", nil)
	if e := s.next(t); e.event != "batches" || !strings.Contains(e.data, `"done":2`) {
		t.Fatalf("first: %+v", e)
	}
	tr.Observe(batch.Event{Kind: batch.EventDone, Model: "sim/echo"})
	tr.Finish(nil)
	for i := 0; ; i++ {
		e := s.next(t)
		if strings.Contains(e.data, `"done":3`) && strings.Contains(e.data, `"running":false`) {
			break
		}
		if i > 50 {
			t.Fatalf("the stream never showed the end: %s", e.data)
		}
	}
	// Batches page renders the job; the bad line's markup stays text.
	page := k.do(req{path: PagePrefix + "batches", bearer: testToken})
	if page.status != 200 || !strings.Contains(string(page.body), tr.ID()+": in.jsonl") {
		t.Fatalf("batches page: %d %s", page.status, page.body)
	}
}

func TestSessionsApproveAndConflicts(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("s1")
	// The list, its filter and counts.
	var list SessionsView
	r := k.do(req{path: APIPrefix + "sessions?state=waiting_approval", bearer: testToken})
	r.json(t, &list)
	if r.status != 200 || len(list.Sessions) != 1 || list.Sessions[0].ID != "s1" || list.Sessions[0].State != StateWaitingApproval || list.Counts[StateWaitingApproval] != 1 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	r = k.do(req{path: APIPrefix + "sessions?state=idle", bearer: testToken})
	r.json(t, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("idle: %s", r.body)
	}
	if r := k.do(req{path: APIPrefix + "sessions?state=weird", bearer: testToken}); r.status != 400 || r.errCode(t) != "bad_request" {
		t.Fatalf("bad state: %d %s", r.status, r.body)
	}
	// Approvals across sessions, with the call's arguments.
	var ap ApprovalsView
	r = k.do(req{path: APIPrefix + "approvals", bearer: testToken})
	r.json(t, &ap)
	if len(ap.Approvals) != 1 || ap.Approvals[0].Interrupt != in.ID || ap.Approvals[0].Tool != "refund" || ap.Approvals[0].Effect != "non_idempotent_write" || !strings.Contains(ap.Approvals[0].Arguments, "order") {
		t.Fatalf("approvals: %s", r.body)
	}
	// Refusals: no token; a cookie without the CSRF header; a cross-site
	// request with both; a wrong body.
	path := APIPrefix + "sessions/s1/approve"
	body := ResolveRequest{Interrupt: in.ID, Note: "ok by Ann"}
	if r := k.do(req{method: "POST", path: path, body: body}); r.status != http.StatusUnauthorized || r.errCode(t) != "unauthorized" {
		t.Fatalf("no token: %d %s", r.status, r.body)
	}
	cookie, csrf := k.login()
	if r := k.do(req{method: "POST", path: path, body: body, cookie: cookie}); r.status != http.StatusForbidden || r.errCode(t) != "csrf" {
		t.Fatalf("no csrf: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: path, body: body, cookie: cookie, header: map[string]string{CSRFHeader: strings.Repeat("0", 64)}}); r.status != http.StatusForbidden {
		t.Fatalf("wrong csrf: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: path, body: body, cookie: cookie, header: map[string]string{CSRFHeader: csrf, "Origin": "https://evil.example"}}); r.status != http.StatusForbidden || r.errCode(t) != "csrf" {
		t.Fatalf("cross-site origin: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: path, body: body, bearer: testToken, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); r.status != http.StatusForbidden {
		t.Fatalf("cross-site fetch: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: path, body: map[string]any{"interrupt": in.ID, "extra": 1}, bearer: testToken}); r.status != 400 {
		t.Fatalf("unknown field: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/s1/approve", body: ResolveRequest{Interrupt: "approval/9/none"}, bearer: testToken}); r.status != 404 || r.errCode(t) != "unknown_interrupt" {
		t.Fatalf("unknown interrupt: %d %s", r.status, r.body)
	}
	if k.refunds("s1") != 0 {
		t.Fatal("the refund ran before an approval was accepted")
	}
	// Accepted with the cookie and its CSRF token, same origin.
	r = k.do(req{method: "POST", path: path, body: body, cookie: cookie, header: map[string]string{CSRFHeader: csrf, "Origin": k.srv.URL, "Sec-Fetch-Site": "same-origin"}})
	if r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	// A second resolution: the typed already-resolved answer, with the first.
	r = k.do(req{method: "POST", path: APIPrefix + "sessions/s1/reject", body: ResolveRequest{Interrupt: in.ID, Note: "too late"}, bearer: testToken})
	var eb ErrorBody
	r.json(t, &eb)
	if r.status != http.StatusConflict || eb.Error.Code != "already_resolved" || eb.Error.Approved == nil || !*eb.Error.Approved || eb.Error.Reason != "ok by Ann" {
		t.Fatalf("second resolution: %d %s", r.status, r.body)
	}
	if res, err := k.m.Wait(ctxT(t, 15*time.Second), "s1"); err != nil || res.Status != session.TurnCompleted {
		t.Fatalf("turn: %+v %v", res, err)
	}
	var sv SessionView
	r = k.do(req{path: APIPrefix + "sessions/s1", bearer: testToken})
	r.json(t, &sv)
	if sv.State != StateIdle || len(sv.Tools) != 1 || sv.Tools[0].Status != "succeeded" || sv.Tools[0].Result != hostile || sv.Tools[0].Attempts != 1 || sv.Tools[0].Effect != "non_idempotent_write" {
		t.Fatalf("session: %s", r.body)
	}
	kinds := map[string]int{}
	for _, e := range sv.Timeline {
		kinds[e.Kind]++
		if e.Kind == "model_output" && e.Usage == nil {
			t.Fatalf("model call without usage: %+v", e)
		}
	}
	if kinds["model_output"] != 2 || kinds["approval_resolved"] != 1 || kinds["tool_finished"] != 1 || kinds["turn_finished"] != 1 {
		t.Fatalf("timeline kinds: %v", kinds)
	}
	if k.refunds("s1") != 1 {
		t.Fatalf("refund ran %d times", k.refunds("s1"))
	}
	if r := k.do(req{path: APIPrefix + "sessions/nobody", bearer: testToken}); r.status != 404 || r.errCode(t) != "unknown_session" {
		t.Fatalf("unknown session: %d %s", r.status, r.body)
	}
}

// TestConcurrentApprovals: two operators approve the same call at once;
// it is resolved once, the other gets 409 already_resolved, and the write
// runs once.
func TestConcurrentApprovals(t *testing.T) {
	k := newKit(t, kitOpts{})
	for round := 0; round < 3; round++ {
		id := fmt.Sprintf("c%d", round)
		in := k.refundSession(id)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		codes := make([]string, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := k.do(req{method: "POST", path: APIPrefix + "sessions/" + id + "/approve", body: ResolveRequest{Interrupt: in.ID, Note: fmt.Sprint("operator ", i)}, bearer: testToken})
				statuses[i] = r.status
				if r.status != 200 {
					codes[i] = r.errCode(t)
				}
			}()
		}
		close(start)
		wg.Wait()
		ok, conflict := 0, 0
		for i, s := range statuses {
			switch {
			case s == 200:
				ok++
			case s == http.StatusConflict && codes[i] == "already_resolved":
				conflict++
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("round %d: statuses %v codes %q", round, statuses, codes)
		}
		if res, err := k.m.Wait(ctxT(t, 15*time.Second), id); err != nil || res.Status != session.TurnCompleted {
			t.Fatalf("turn: %+v %v", res, err)
		}
		if n := k.refunds(id); n != 1 {
			t.Fatalf("round %d: the refund ran %d times", round, n)
		}
	}
}

// TestSessionEventsResume: the session stream numbers its events; after a
// dropped connection, Last-Event-ID resumes after the last event seen,
// with nothing repeated and nothing lost.
func TestSessionEventsResume(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("e1")
	s := k.openSSE(APIPrefix+"sessions/e1/events", nil)
	var seen []sseEvent
	for {
		e := s.next(t)
		if e.event != "session" {
			t.Fatalf("event %+v", e)
		}
		seen = append(seen, e)
		if strings.Contains(e.data, `"type":"approval_requested"`) {
			break
		}
	}
	first := mustAtoi(seen[0].id)
	for i, e := range seen {
		if e.id != strconv.Itoa(first+i) {
			t.Fatalf("event %d has id %q after %d", i, e.id, first)
		}
	}
	s.close() // the connection drops
	lastID := seen[len(seen)-1].id
	// Events happen while no one listens.
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/e1/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	if _, err := k.m.Wait(ctxT(t, 15*time.Second), "e1"); err != nil {
		t.Fatal(err)
	}
	s2 := k.openSSE(APIPrefix+"sessions/e1/events", map[string]string{"Last-Event-ID": lastID})
	want, _ := strconv.Atoi(lastID)
	var types []string
	for {
		e := s2.next(t)
		want++
		if e.id != strconv.Itoa(want) {
			t.Fatalf("after resume: id %q, want %d", e.id, want)
		}
		var ev EventView
		if err := jsonUnmarshal(e.data, &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == "turn_finished" {
			if ev.TurnStatus != "completed" {
				t.Fatalf("turn finished %+v", ev)
			}
			break
		}
	}
	if types[0] != "approval_resolved" {
		t.Fatalf("resumed with %q", types)
	}
	// ?after= does the same for scripts.
	s3 := k.openSSE(APIPrefix+"sessions/e1/events?after="+lastID, nil)
	if e := s3.next(t); e.id != strconv.Itoa(mustAtoi(lastID)+1) {
		t.Fatalf("?after: %+v", e)
	}
	if r := k.do(req{path: APIPrefix + "sessions/e1/events?after=x", bearer: testToken}); r.status != 400 {
		t.Fatalf("bad after: %d", r.status)
	}
}

// TestSessionEventsResumeAfterRestart: a page that reconnects with the
// Last-Event-ID it had before the process restarted skips nothing: it gets
// a gap (what happened between is not held), then every event of the new
// process, the approval's resolution first. A stream whose session
// manager closes ends without a last event, so that the page reconnects.
func TestSessionEventsResumeAfterRestart(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("r1")
	s := k.openSSE(APIPrefix+"sessions/r1/events", nil)
	var lastID string
	for {
		e := s.next(t)
		lastID = e.id
		if strings.Contains(e.data, `"type":"approval_requested"`) {
			break
		}
	}
	k.restart()
	stopWaiting := time.AfterFunc(20*time.Second, s.cancel)
	_, err := s.r.ReadString(0)
	stopWaiting.Stop()
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the stream of a closed manager: %v", err)
	}
	s.close()
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/r1/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve after the restart: %d %s", r.status, r.body)
	}
	if _, err := k.m.Wait(ctxT(t, 15*time.Second), "r1"); err != nil {
		t.Fatal(err)
	}
	types := k.resumeUntilTurnEnds(t, "r1", lastID)
	if len(types) < 3 || types[0] != "gap" || types[1] != "approval_resolved" {
		t.Fatalf("resumed after the restart with %q; want a gap, then the approval's resolution", types)
	}
}

// TestReadingDoesNotActivate: the Sessions list, the Approvals list and a
// session's page read a passivated session from the journal, leaving it
// passive (each read still says passive: none brought it back); its
// pending approval is listed, and approving it activates the session,
// which finishes.
func TestReadingDoesNotActivate(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("p1")
	if idle, err := k.m.Passivate(ctxT(t, 10*time.Second), "p1"); err != nil || idle {
		t.Fatalf("passivate: idle %v, %v", idle, err)
	}
	for range 2 {
		var list SessionsView
		k.do(req{path: APIPrefix + "sessions", bearer: testToken}).json(t, &list)
		if len(list.Sessions) != 1 || !list.Sessions[0].Passive || list.Sessions[0].State != StateWaitingApproval || list.Sessions[0].Pending != 1 || list.Counts[StateWaitingApproval] != 1 {
			t.Fatalf("list: %+v", list)
		}
		var aps ApprovalsView
		k.do(req{path: APIPrefix + "approvals", bearer: testToken}).json(t, &aps)
		if len(aps.Approvals) != 1 || aps.Approvals[0].Interrupt != in.ID || aps.Approvals[0].Tool != "refund" {
			t.Fatalf("approvals: %+v", aps)
		}
		var one SessionView
		k.do(req{path: APIPrefix + "sessions/p1", bearer: testToken}).json(t, &one)
		if !one.Passive || len(one.Approvals) != 1 || one.Step != string(session.StepAwaitToolApproval) || len(one.Timeline) == 0 {
			t.Fatalf("session: %+v", one)
		}
		if r := k.do(req{path: PagePrefix + "approvals", bearer: testToken}); r.status != 200 || !bytes.Contains(r.body, []byte(in.ID)) {
			t.Fatalf("approvals page: %d", r.status)
		}
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/p1/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	if res, err := k.m.Wait(ctxT(t, 15*time.Second), "p1"); err != nil || res.Status != "completed" || k.refunds("p1") != 1 {
		t.Fatalf("after approval: %+v, %v, %d refunds", res, err, k.refunds("p1"))
	}
	var list SessionsView
	k.do(req{path: APIPrefix + "sessions", bearer: testToken}).json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Passive || list.Sessions[0].State != StateIdle {
		t.Fatalf("list of the active session: %+v", list)
	}
}

// TestListLimitKeepsLiveSessions: past Options.ListLimit a list looks at
// the last ids and at every session the process runs or parked with an
// approval pending: a waiting session whose id sorts first is still on
// the Approvals page and in the waiting_approval filter.
func TestListLimitKeepsLiveSessions(t *testing.T) {
	k := newKit(t, kitOpts{limit: 2, idle: 50 * time.Millisecond})
	in := k.refundSession("a-waits")
	for _, id := range []string{"z1", "z2", "z3"} {
		if err := k.m.Send(ctxT(t, 10*time.Second), id, llm.UserText("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := k.m.Wait(ctxT(t, 10*time.Second), id); err != nil {
			t.Fatal(err)
		}
	}
	// All passivate by idleness; a-waits is parked with its approval.
	deadline := time.Now().Add(15 * time.Second)
	for !slices.Equal(k.m.Live(), []string{"a-waits"}) {
		if time.Now().After(deadline) {
			t.Fatalf("live sessions %q", k.m.Live())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var aps ApprovalsView
	k.do(req{path: APIPrefix + "approvals", bearer: testToken}).json(t, &aps)
	if len(aps.Approvals) != 1 || aps.Approvals[0].Session != "a-waits" || aps.Approvals[0].Interrupt != in.ID {
		t.Fatalf("approvals past the list's limit: %+v", aps)
	}
	var list SessionsView
	k.do(req{path: APIPrefix + "sessions?state=waiting_approval", bearer: testToken}).json(t, &list)
	if !list.Truncated || len(list.Sessions) != 1 || list.Sessions[0].ID != "a-waits" {
		t.Fatalf("waiting sessions past the list's limit: %+v", list)
	}
	k.do(req{path: APIPrefix + "sessions", bearer: testToken}).json(t, &list)
	var ids []string
	for _, s := range list.Sessions {
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"a-waits", "z2", "z3"}) {
		t.Fatalf("listed %q; want the waiting session and the last two", ids)
	}
}

// TestStalledStreamNeverBlocksTheSession: a client that opens a session's
// stream and never reads does not hold the session up.
func TestStalledStreamNeverBlocksTheSession(t *testing.T) {
	k := newKit(t, kitOpts{})
	k.h.sseWrite = 200 * time.Millisecond
	u, _ := url.Parse(k.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %ssessions/st/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", APIPrefix, u.Host, testToken)
	for i := range 3 {
		id := "st"
		if i > 0 {
			id = fmt.Sprint("st", i)
		}
		in := k.refundSession(id)
		if r := k.do(req{method: "POST", path: APIPrefix + "sessions/" + id + "/approve", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != 200 {
			t.Fatalf("approve: %d", r.status)
		}
		if res, err := k.m.Wait(ctxT(t, 15*time.Second), id); err != nil || res.Status != session.TurnCompleted {
			t.Fatalf("turn %+v %v", res, err)
		}
	}
}

func TestSendAndCancel(t *testing.T) {
	k := newKit(t, kitOpts{})
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/m1/messages", body: SendRequest{Text: "hello there"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("send without token: %d", r.status)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/m1/messages", body: SendRequest{Text: ""}, bearer: testToken}); r.status != 400 || r.errCode(t) != "bad_request" {
		t.Fatalf("empty message: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/m1/messages", body: SendRequest{Text: "hello there"}, bearer: testToken}); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	res, err := k.m.Wait(ctxT(t, 15*time.Second), "m1")
	if err != nil || res.Status != session.TurnCompleted || !strings.Contains(res.Answer, "hello there") {
		t.Fatalf("turn: %+v %v", res, err)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/m1/cancel", bearer: testToken}); r.status != http.StatusConflict || r.errCode(t) != "no_active_turn" {
		t.Fatalf("cancel idle: %d %s", r.status, r.body)
	}
	k.refundSession("m2")
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/m2/cancel", bearer: testToken}); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	res, err = k.m.Wait(ctxT(t, 15*time.Second), "m2")
	if err != nil || res.Status != session.TurnCancelled {
		t.Fatalf("cancelled turn: %+v %v", res, err)
	}
	if k.refunds("m2") != 0 {
		t.Fatal("a cancelled approval ran")
	}
}

// TestHostileContentEscaped: a tool result and a model answer carrying
// markup are escaped on every page that shows them.
func TestHostileContentEscaped(t *testing.T) {
	k := newKit(t, kitOpts{})
	in := k.refundSession("x1")
	if err := k.m.Resolve(ctxT(t, 10*time.Second), "x1", in.ID, true, `<script>window.__pwned=3</script>`); err != nil {
		t.Fatal(err)
	}
	if _, err := k.m.Wait(ctxT(t, 15*time.Second), "x1"); err != nil {
		t.Fatal(err)
	}
	page := k.do(req{path: PagePrefix + "sessions/x1", bearer: testToken})
	body := string(page.body)
	if page.status != 200 || !strings.Contains(body, "&lt;script&gt;window.__pwned=1&lt;/script&gt;") {
		t.Fatalf("session page: %d %s", page.status, body)
	}
	if strings.Contains(body, "<script>window") || strings.Contains(body, "<img src=x") {
		t.Fatalf("hostile markup rendered as markup:\n%s", body)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	// The session id itself is escaped too.
	k2 := k.do(req{path: PagePrefix + "sessions/%3Cb%3Eid", bearer: testToken})
	if k2.status != 404 || strings.Contains(string(k2.body), "<b>id") {
		t.Fatalf("unknown session page: %d %s", k2.status, k2.body)
	}
}

// TestLoopbackAndReadOnly: bound to loopback, a console reads without the
// token from a loopback Host, not from another Host (DNS rebinding); with
// no token it refuses every state change.
func TestLoopbackAndReadOnly(t *testing.T) {
	k := newKit(t, kitOpts{loopback: true, noToken: true})
	k.refundSession("l1")
	if r := k.do(req{path: APIPrefix + "sessions"}); r.status != 200 {
		t.Fatalf("loopback read: %d %s", r.status, r.body)
	}
	r, _ := http.NewRequest(http.MethodGet, k.srv.URL+APIPrefix+"sessions", nil)
	r.Host = "evil.example:80"
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("rebinding host: %d", res.StatusCode)
	}
	for _, p := range []string{"credentials", "batches", "sessions", "sessions/l1", "approvals", "cluster"} {
		if r := k.do(req{path: PagePrefix + p}); r.status != 200 {
			t.Fatalf("page %s: %d", p, r.status)
		}
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/l1/approve", body: ResolveRequest{Interrupt: "x"}, bearer: "anything"}); r.status != http.StatusForbidden || r.errCode(t) != "read_only" {
		t.Fatalf("read-only approve: %d %s", r.status, r.body)
	}
}

// TestPagesNeedLogin: without loopback, pages send a visitor to the login
// page; a wrong token is refused; the cookie opens every page, and never
// carries the token; cluster JSON says no cluster.
func TestPagesNeedLogin(t *testing.T) {
	k := newKit(t, kitOpts{})
	r := k.do(req{path: PagePrefix + "sessions"})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), PagePrefix+"login?next=") {
		t.Fatalf("no login: %d %s", r.status, r.header.Get("Location"))
	}
	if r := k.do(req{path: PagePrefix}); r.status != http.StatusSeeOther {
		t.Fatalf("root: %d", r.status)
	}
	cookie, _ := k.login()
	for _, p := range []string{"credentials", "batches", "sessions", "sessions?state=failed", "approvals", "cluster", "login", "static/console.js", "static/console.css"} {
		r := k.do(req{path: PagePrefix + p, cookie: cookie})
		if r.status != 200 {
			t.Fatalf("page %s: %d", p, r.status)
		}
		if strings.Contains(string(r.body), testToken) {
			t.Fatalf("page %s shows the token", p)
		}
	}
	var cv ClusterView
	r = k.do(req{path: APIPrefix + "cluster", cookie: cookie})
	r.json(t, &cv)
	if cv.Enabled {
		t.Fatalf("cluster: %s", r.body)
	}
	if r := k.do(req{path: APIPrefix + "nothing", cookie: cookie}); r.status != 404 || r.errCode(t) != "not_found" {
		t.Fatalf("unknown endpoint: %d", r.status)
	}
	// Log out: the cookie stops working.
	lo, _ := http.NewRequest(http.MethodPost, k.srv.URL+PagePrefix+"logout", nil)
	lo.AddCookie(cookie)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(lo)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if r := k.do(req{path: APIPrefix + "sessions", cookie: cookie}); r.status != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", r.status)
	}
	// A wrong token at the login form.
	bad, _ := http.NewRequest(http.MethodPost, k.srv.URL+PagePrefix+"login", strings.NewReader("token=nope"))
	bad.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err = http.DefaultClient.Do(bad)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong login: %d", res.StatusCode)
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(Options{Tick: -1}); err == nil {
		t.Fatal("negative tick accepted")
	}
	var ce *llm.ConfigError
	if _, err := New(Options{Journal: nil, ListLimit: -1}); !errors.As(err, &ce) {
		t.Fatalf("negative limit: %v", err)
	}
	if safeNext("//evil.example/") != PagePrefix+"credentials" || safeNext("https://evil.example") != PagePrefix+"credentials" || safeNext(PagePrefix+"approvals") != PagePrefix+"approvals" {
		t.Fatal("safeNext lets a redirect out")
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestSessionIDWithSlash: a session id with a slash and markup reaches the
// API escaped in the path, and the list links to it escaped.
func TestSessionIDWithSlash(t *testing.T) {
	k := newKit(t, kitOpts{})
	id := "team/<b>42</b>"
	esc := url.PathEscape(id)
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/" + esc + "/messages", body: SendRequest{Text: "hi"}, bearer: testToken}); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	if _, err := k.m.Wait(ctxT(t, 15*time.Second), id); err != nil {
		t.Fatal(err)
	}
	var sv SessionView
	r := k.do(req{path: APIPrefix + "sessions/" + esc, bearer: testToken})
	r.json(t, &sv)
	if r.status != 200 || sv.ID != id {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	page := k.do(req{path: PagePrefix + "sessions", bearer: testToken})
	if !strings.Contains(string(page.body), `href="/console/sessions/team%2f%3cb%3e42%3c%2fb%3e"`) && !strings.Contains(string(page.body), `href="/console/sessions/team%2F%3Cb%3E42%3C%2Fb%3E"`) {
		t.Fatalf("sessions page link:\n%s", page.body)
	}
	if p := k.do(req{path: PagePrefix + "sessions/" + esc, bearer: testToken}); p.status != 200 || strings.Contains(string(p.body), "<b>42") {
		t.Fatalf("session page: %d", p.status)
	}
}

// TestCredentialsCache: with a response cache, the credentials API and
// page count its hits and misses; without one, neither shows a cache.
func TestCredentialsCache(t *testing.T) {
	k := newKit(t, kitOpts{cache: true})
	for range 3 {
		if _, err := k.rt.Chat(ctxT(t, 10*time.Second), &llm.ChatRequest{Model: "sim/echo", Messages: []llm.Message{llm.UserText("same question")}}); err != nil {
			t.Fatal(err)
		}
	}
	var v CredentialsView
	k.do(req{path: APIPrefix + "credentials", bearer: testToken}).json(t, &v)
	if v.Cache == nil || v.Cache.Hits != 2 || v.Cache.Misses != 1 || v.Cache.Stored != 1 {
		t.Fatalf("cache view %+v", v.Cache)
	}
	if p := k.do(req{path: PagePrefix + "credentials", bearer: testToken}); !bytes.Contains(p.body, []byte(`<table id="cache"`)) {
		t.Fatalf("the credentials page has no cache table: %s", p.body)
	}
	var none CredentialsView
	newKit(t, kitOpts{}).do(req{path: APIPrefix + "credentials", bearer: testToken}).json(t, &none)
	if none.Cache != nil {
		t.Fatalf("a runtime without a cache shows %+v", none.Cache)
	}
}
