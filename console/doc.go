// Package console is Chorus's operator console: web pages and a JSON/SSE
// API that show a runtime's credentials, the process's batch jobs and its
// durable sessions live, and resolve the approvals sessions wait for.
// chorus serve and chorus node serve it; a Go program mounts it over its
// own runtime, session manager and batch registry:
//
//	h, err := console.New(console.Options{Runtime: rt, Sessions: mgr, Batches: reg, Token: token})
//	if err != nil { return err }
//	mux := http.NewServeMux()
//	h.Register(mux) // /console/ (pages) and /api/console/ (API)
//
// # Pages
//
// Server-rendered with html/template, with a small stylesheet and one
// hand-written script embedded in the binary (no build step, no
// third-party code). The script keeps the pages live: the Credentials and
// Batches tables follow their SSE streams, a session's page follows its
// event stream, the Sessions and Approvals lists poll the API. It writes
// every value with textContent, never innerHTML, and the pages carry a
// Content-Security-Policy that allows only the console's own script: model
// and tool content is text wherever it appears.
//
//	/console/credentials    every credential: fingerprint (never the key), queued, in flight, requests, 429s, retries, requests and tokens left in the window (with a chart of it), cooldown, learned fallbacks, cost; aliases, their strategy, their targets and the step that serves now; each routed alias's targets with their share of the calls, served, failed, error rate, latency estimate, ejection and cached input
//	/console/batches        each job: progress, rate, ETA, tokens, cost when priced, per-model summary, bad lines
//	/console/sessions       the sessions with their state; ?state=waiting_approval|running|failed|idle
//	/console/sessions/{id}  one session: state, pending approvals, tool calls (effect, attempts, outcome), the journal's timeline (turns, steps, model calls with usage, approvals), live events, send a message, cancel the turn
//	/console/approvals      every pending approval: arguments, a deadline countdown, approve or reject with a note
//	/console/cluster        on a cluster member: this member, the members, which member owns each key's budget, where each session lives (its lease's holder), the journal's sessions
//	/console/keys           with Options.KeyStore, the gateway's keys: name, fingerprint (never the key), models, limits, status, spend against the budget (a bar); a form that creates one (its text shown once)
//	/console/keys/{id}      one key: its settings, spend (live) and ledger, charts of its spend, requests and tokens per hour from Options.RequestLog; forms that set its budget and limits, rotate and revoke it
//	/console/login          the operator token in, a login cookie out
//
// # API
//
// JSON (snake_case fields; errors are {"error": {"code", "message"}}).
//
//	GET  /api/console/credentials            CredentialsView
//	GET  /api/console/credentials/stream     SSE: "credentials" events (a CredentialsView every Tick)
//	GET  /api/console/batches                BatchesView
//	GET  /api/console/batches/stream         SSE: "batches" events (a BatchesView every Tick)
//	GET  /api/console/batches/{job}          BatchView
//	GET  /api/console/sessions?state=S       SessionsView (S: waiting_approval, running, failed, idle; none: all)
//	GET  /api/console/sessions/{id}          SessionView
//	GET  /api/console/sessions/{id}/events   SSE: "session" events (EventView), id: the event's number; resume with Last-Event-ID or ?after=N
//	GET  /api/console/approvals              ApprovalsView
//	GET  /api/console/cluster                ClusterView (placement from the journal's leases, store.LeaseLister)
//	POST /api/console/sessions/{id}/approve  {"interrupt": "...", "note": "..."} -> 200 ResolveResponse
//	POST /api/console/sessions/{id}/reject   {"interrupt": "...", "note": "..."} -> 200 ResolveResponse
//	POST /api/console/sessions/{id}/cancel   -> 200 (409 no_active_turn)
//	POST /api/console/sessions/{id}/messages {"text": "..."} -> 202
//	GET  /api/console/keys                   KeysBody (Options.KeyStore; keys.go names every route of the keys' admin API)
//	POST /api/console/keys                   KeyRequest -> 201 KeyBody with the key's text, once
//
// A resolution goes through session.Manager.Resolve (or the cluster's),
// with its exactly-once rule: the second resolution of an interrupt, from
// a second click or a second operator, is 409 with code already_resolved
// and the first resolution's approved and reason; a resolution after the
// deadline or the turn is 409 stale_interrupt; an unknown interrupt 404
// unknown_interrupt; an unknown session 404 unknown_session.
//
// # Safety
//
//   - Every state change needs the operator token (Options.Token): as
//     "Authorization: Bearer <token>" (scripts, chorus sessions), or the
//     login cookie the login form sets (the pages). It also needs the CSRF
//     checks: a request whose Sec-Fetch-Site says cross-site, or whose
//     Origin is another host, is refused; with the cookie the login's CSRF
//     token must come in the X-CSRF-Token header (the pages read it from
//     their csrf-token meta tag). The cookie is HttpOnly, SameSite=Strict,
//     holds a random login id (never the token), and lasts 12 hours. A
//     console without a token is read-only.
//   - Reading (pages, GETs, streams) needs the token too, unless the
//     console is bound to loopback (Options.Loopback) and the request names
//     a loopback host (a DNS-rebinding page does not).
//   - Credentials are named by their key's fingerprint (the first 16 hex
//     digits of its SHA-256); no key reaches the console.
//   - The console never blocks a session: it reads snapshots through the
//     session's actor like any caller, and follows the session's bounded
//     event stream, which drops the oldest events for a reader that falls
//     behind (an EventView of type gap says how many). Each write to a
//     stream's client has a deadline (5s): a client that stops reading is
//     dropped.
//
// # Decisions
//
//   - Reading sessions (the lists, the Approvals page, one session's page)
//     activates none: the list is the journal's (Manager.Sessions), the
//     last Options.ListLimit ids at most (sorted by id) plus every session
//     the local Manager runs or parked with approvals pending
//     (Manager.Live: no waiting approval of this process is left out; on a
//     cluster member the limit is the journal's last ids only), and each
//     session's state is
//     session.Manager.Peek's (an active session's snapshot from its actor,
//     a passivated one's replayed from the journal, marked passive). On a
//     cluster member every session's state is replayed from the cluster's
//     journal (session.ReadSnapshot), wherever it runs; a turn running
//     there shows its journal's step (resume_turn rather than run_model).
//     Only a change (approve, reject, cancel, send) activates a session.
//   - The timeline is the journal decoded (session.ReadTimeline), read
//     without activating the session; it shows per-call usage, which the
//     snapshot sums.
//   - Event numbers (session.Event.Seq) start, in each process, from its
//     clock in microseconds and go on by one: a client that reconnects
//     with the Last-Event-ID it had before a restart, or before its
//     session moved to another cluster node, gets a gap event first
//     (what happened between is not held: the page reloads the session)
//     and every event held, never skipping one. A stream whose source
//     closes (the manager stopping, the session's node lost) just ends,
//     without a last event, and EventSource reconnects.
//   - The window chart is drawn by the console's own script as inline SVG
//     from the stream's samples (the share of the request limit left, and
//     the calls in flight), no chart library.
//   - The browser tests (TestBrowser, and the end of TestConsoleOnClusterNode)
//     drive Debian's chromium through chromedp, headless. They run with the
//     package under make test, race detector included (the whole package
//     takes about a minute under -race on two cores); under CI=true a
//     missing chromium fails them, elsewhere they skip naming the package
//     to install. The browser is killed and reaped when each test ends.
//   - Batch progress comes from a batch.Registry the program feeds (each
//     job's Tracker.Observe as its Job.Observe): chorus serve and chorus
//     node show the jobs run in their own process.
//
// Guide: docs/console.md in the repository, which starts from the task and
// ends with how it is tested; this comment stays the reference.
package console
