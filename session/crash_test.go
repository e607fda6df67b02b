package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/store"
)

// The crash suite runs real sessions in a child process (this test binary,
// re-executed with crashChildEnv set) on a SQLite journal, and kills the
// child with SIGKILL at randomized crash points: during RunModel (before
// the request and with the request in flight), during CallTool for each
// effect (before and after the side effect), while an approval is pending,
// after a steering message was queued, between steps, and between two
// ordered writes of one response (the earlier ones succeeded, the next
// has not started). It restarts the
// child until every session finishes, then checks the journal, the
// side-effect ledger the tools append to, and the model requests.
//
// CHORUS_CRASH_POINTS sets how many crash points to try (default 30).

const (
	crashChildEnv = "CHORUS_SESSION_CRASH_CHILD"
	crashDirEnv   = "CHORUS_SESSION_CRASH_DIR"
	crashURLEnv   = "CHORUS_SESSION_CRASH_MODEL_URL"
	crashSessions = 3
	steerText     = "steer: also check the warranty"
)

// Crash point kinds. Markers name them as their first words; TOOL markers
// add the effect.
var crashKinds = []string{
	"STEP RunModel", "MODEL inflight",
	"TOOL start read", "TOOL start idempotent_write", "TOOL start non_idempotent_write", "TOOL start unclassified",
	"TOOL done read", "TOOL done idempotent_write", "TOOL done non_idempotent_write", "TOOL done unclassified",
	"APPROVAL pending", "QUEUED", "STEP boundary", "WRITE next",
}

// ---- child ----

var (
	markMu sync.Mutex
	markIn *bufio.Reader
)

// mark prints a crash point marker and waits for the parent's go-ahead:
// the parent either answers or kills the process right there.
func mark(format string, args ...any) {
	markMu.Lock()
	defer markMu.Unlock()
	fmt.Fprintf(os.Stdout, "MARK "+format+"\n", args...)
	if _, err := markIn.ReadString('\n'); err != nil {
		os.Exit(4)
	}
}

// crashChild is the session process. It resumes (or starts) the sessions,
// approves every pending approval, and exits 0 once all are finished.
func crashChild() int {
	markIn = bufio.NewReader(os.Stdin)
	dir, url := os.Getenv(crashDirEnv), os.Getenv(crashURLEnv)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 3 }
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		return fail(err)
	}
	defer j.Close()
	ledgerFile, err := os.OpenFile(filepath.Join(dir, "ledger"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer ledgerFile.Close()
	var lmu sync.Mutex
	var m *Manager
	effectTool := func(name string, effect Effect) Tool {
		return Tool{Def: llm.Tool{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, Effect: effect,
			Handler: func(ctx context.Context, c Call) (Result, error) {
				mark("TOOL start %s %s %s %d", c.Session, c.ID, c.Effect, c.Attempt)
				key := c.IdempotencyKey
				if key == "" {
					key = "-"
				}
				lmu.Lock()
				_, err := fmt.Fprintf(ledgerFile, "%s %s %s %d %s\n", c.Session, c.ID, c.Effect, c.Attempt, key)
				if err == nil {
					err = ledgerFile.Sync()
				}
				lmu.Unlock()
				if err != nil {
					return Result{}, err
				}
				if c.ID == "m1c1" {
					// Steer the turn from inside it, once.
					s, err := m.Snapshot(ctx, c.Session)
					if err != nil {
						return Result{}, err
					}
					if !hasText(s.History, steerText) && !hasText(s.Queued, steerText) {
						if err := m.Send(ctx, c.Session, llm.UserText(steerText)); err != nil {
							return Result{}, err
						}
						mark("QUEUED %s", c.Session)
					}
				}
				mark("TOOL done %s %s %s %d", c.Session, c.ID, c.Effect, c.Attempt)
				return Result{Content: fmt.Sprintf(`{"%s":"ok"}`, c.ID)}, nil
			}}
	}
	client, err := clientFor(url)
	if err != nil {
		return fail(err)
	}
	m, err = New(Options{
		Journal: j, Model: client, ModelName: "crash-model", Media: NewLocalMedia(filepath.Join(dir, "media")),
		Tools: []Tool{
			effectTool("lookup", EffectRead), effectTool("reserve", EffectIdempotentWrite),
			effectTool("refund", EffectNonIdempotentWrite), effectTool("notify", EffectUnclassified),
		},
		Policy:        map[string]ToolPolicy{"notify": {RequireApproval: Bool(false)}},
		ModelAttempts: 5, RetryBackoff: 2 * time.Millisecond,
	})
	if err != nil {
		return fail(err)
	}
	m.hook = func(p string) { mark("%s", p) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	defer m.Close(context.Background())
	if _, err := m.Recover(ctx); err != nil {
		return fail(err)
	}
	ids := make([]string, crashSessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i+1)
		if _, err := m.Snapshot(ctx, ids[i]); errors.Is(err, ErrUnknownSession) {
			if err := m.Send(ctx, ids[i], llm.UserText("session "+ids[i]+": refund my order")); err != nil {
				return fail(err)
			}
		} else if err != nil {
			return fail(err)
		}
	}
	for {
		done := 0
		for _, id := range ids {
			s, err := m.Snapshot(ctx, id)
			if err != nil {
				return fail(err)
			}
			for _, p := range s.Pending {
				if err := m.Resolve(ctx, id, p.ID, true, "auto"); err != nil && !errors.Is(err, ErrAlreadyResolved) && !errors.Is(err, ErrStaleInterrupt) {
					return fail(err)
				}
			}
			if s.Last.Turn >= 1 && s.Step == StepAwaitUserMessage && len(s.Queued) == 0 {
				done++
			}
		}
		if done == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(3 * time.Millisecond):
		}
	}
	fmt.Println("ALL DONE")
	return 0
}

func hasText(ms []llm.Message, s string) bool {
	return slices.ContainsFunc(ms, func(m llm.Message) bool { return m.Content == s })
}

// ---- parent: the model ----

// crashModel answers from the conversation, not from the order of
// requests, so a request lost with a killed child changes nothing: it
// pushes the step that fits the request to an llmtest server and forwards
// the request there, one at a time. Before forwarding it offers the
// request to the parent, which may kill the child while it is in flight.
type crashModel struct {
	srv      *llmtest.Server
	front    *httptest.Server
	inflight chan offer
	mu       sync.Mutex
	bodies   []string
}

func newCrashModel() *crashModel {
	cm := &crashModel{srv: llmtest.NewServer(), inflight: make(chan offer)}
	cm.front = httptest.NewServer(http.HandlerFunc(cm.serve))
	return cm
}

func (cm *crashModel) close() {
	cm.front.Close()
	cm.srv.Close()
}

// offer is a model request in flight, offered to the parent before it is
// answered; closing wait lets it go on.
type offer struct {
	session string
	wait    chan struct{}
}

// crashStep is the scripted answer to a request: tool calls of four
// effects, then two more calls, then the final text.
func crashStep(body []byte) (llmtest.Step, string, error) {
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return llmtest.Step{}, "", err
	}
	session, assistants := "", 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			assistants++
		}
		if rest, ok := strings.CutPrefix(m.text(), "session "); ok && session == "" {
			session, _, _ = strings.Cut(rest, ":")
		}
	}
	switch assistants {
	case 0:
		return llmtest.ToolCalls(call("m1c1", "lookup", `{"order":7}`), call("m1c2", "reserve", `{"order":7}`),
			call("m1c3", "refund", `{"order":7}`), call("m1c4", "notify", `{"order":7}`)), session, nil
	case 1:
		return llmtest.ToolCalls(call("m2c1", "lookup", `{"order":8}`), call("m2c2", "reserve", `{"order":8}`)), session, nil
	}
	return llmtest.Text("done " + session), session, nil
}

func (cm *crashModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	step, session, err := crashStep(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.bodies = append(cm.bodies, string(body))
	wait := make(chan struct{})
	select {
	case cm.inflight <- offer{session: session, wait: wait}:
	case <-r.Context().Done():
		return
	}
	select {
	case <-wait:
	case <-r.Context().Done():
		return
	}
	cm.srv.Push(step)
	up, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, cm.srv.URL+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return
	}
	up.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				return
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func (cm *crashModel) requestBodies() []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return slices.Clone(cm.bodies)
}

// ---- parent: the runs ----

// kill is one crash point the parent triggered.
type kill struct {
	Kind   string
	Marker string
	// Fields of the marker: session, call, effect, attempt, interrupt.
	Session, Call, Interrupt string
	Effect                   Effect
	Attempt                  int
}

func parseMarker(line string) (kind string, k kill) {
	f := strings.Fields(strings.TrimPrefix(line, "MARK "))
	k.Marker = strings.Join(f, " ")
	switch {
	case len(f) >= 6 && f[0] == "TOOL":
		kind = f[0] + " " + f[1] + " " + f[4]
		k.Session, k.Call, k.Effect = f[2], f[3], Effect(f[4])
		k.Attempt, _ = strconv.Atoi(f[5])
	case len(f) >= 4 && f[0] == "APPROVAL":
		kind, k.Session, k.Interrupt = "APPROVAL pending", f[2], f[3]
	case len(f) >= 2 && f[0] == "QUEUED":
		kind, k.Session = "QUEUED", f[1]
	case len(f) >= 4 && f[0] == "WRITE":
		kind, k.Session, k.Call = f[0]+" "+f[1], f[2], f[3]
	case len(f) >= 3 && f[0] == "STEP":
		kind, k.Session = f[0]+" "+f[1], f[2]
	default:
		kind = k.Marker
	}
	k.Kind = kind
	return kind, k
}

type runResult struct {
	killed *kill
	done   bool
}

// runChild starts the child and kills it at the nth occurrence of kind.
func runChild(t *testing.T, cm *crashModel, dir, kind string, nth int) runResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashDirEnv+"="+dir, crashURLEnv+"="+cm.front.URL+"/v1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	exited := make(chan error, 1)
	var res runResult
	seen := 0
	doKill := func(k kill) {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		res.killed = &k
	}
	timeout := time.After(120 * time.Second)
	for lines != nil {
		select {
		case line, open := <-lines:
			if !open {
				lines = nil
				break
			}
			if line == "ALL DONE" {
				res.done = true
				continue
			}
			if !strings.HasPrefix(line, "MARK ") {
				continue
			}
			if res.killed != nil {
				continue
			}
			kd, k := parseMarker(line)
			if kd == kind {
				seen++
				if seen == nth {
					doKill(k)
					continue
				}
			}
			_, _ = io.WriteString(stdin, "go\n")
		case o := <-cm.inflight:
			if res.killed == nil && kind == "MODEL inflight" {
				seen++
				if seen == nth {
					doKill(kill{Kind: kind, Marker: "MODEL inflight " + o.session, Session: o.session})
				}
			}
			close(o.wait)
		case <-timeout:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("child did not finish; stderr:\n%s", stderr.String())
		}
	}
	go func() { exited <- cmd.Wait() }()
	// Requests the child had in flight end with it; drain offers meanwhile.
	for {
		select {
		case o := <-cm.inflight:
			close(o.wait)
			continue
		case err := <-exited:
			if res.killed == nil && (err != nil || !res.done) {
				t.Fatalf("child failed: %v; stderr:\n%s", err, stderr.String())
			}
		}
		break
	}
	return res
}

func TestCrashSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash suite skipped in -short mode")
	}
	points := 30
	if v := os.Getenv("CHORUS_CRASH_POINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("CHORUS_CRASH_POINTS=%q", v)
		}
		points = n
	}
	cm := newCrashModel()
	defer cm.close()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHORUS_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("crash seed %d (CHORUS_CRASH_SEED to replay the choices)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	hits := map[string]int{}
	tried, scenarios, restarts := 0, 0, 0
	for tried < points {
		scenarios++
		dir := t.TempDir()
		var kills []kill
		for run := 0; ; run++ {
			if run > 60 {
				t.Fatalf("scenario %d: no end after %d restarts", scenarios, run)
			}
			kind := leastHit(rng, hits)
			nth := 1 + rng.IntN(3)
			res := runChild(t, cm, dir, kind, nth)
			if res.killed != nil {
				kills = append(kills, *res.killed)
				hits[kind]++
				tried++
				restarts++
				continue
			}
			break
		}
		checkScenario(t, dir, cm, kills)
	}
	var byKind []string
	for _, k := range crashKinds {
		byKind = append(byKind, fmt.Sprintf("%s=%d", k, hits[k]))
		if points >= len(crashKinds) && hits[k] == 0 {
			t.Errorf("crash kind %q never tried", k)
		}
	}
	t.Logf("crash points tried: %d in %d scenarios (%d sessions each); by kind: %s", tried, scenarios, crashSessions, strings.Join(byKind, ", "))
	fmt.Printf("session crash suite: %d crash points tried, %d restarts, %d scenarios\n", tried, restarts, scenarios)
}

// leastHit picks a random kind among those tried least so far.
func leastHit(rng *rand.Rand, hits map[string]int) string {
	low := -1
	var cands []string
	for _, k := range crashKinds {
		switch n := hits[k]; {
		case low < 0 || n < low:
			low, cands = n, []string{k}
		case n == low:
			cands = append(cands, k)
		}
	}
	return cands[rng.IntN(len(cands))]
}

type ledgerLine struct {
	Session, Call string
	Effect        Effect
	Attempt       int
	Key           string
}

// checkScenario checks the rules against the journal, the ledger and the
// model requests once every session finished.
func checkScenario(t *testing.T, dir string, cm *crashModel, kills []kill) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "ledger"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	effects := map[string][]ledgerLine{} // session/call -> lines
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		a, _ := strconv.Atoi(f[3])
		effects[f[0]+"/"+f[1]] = append(effects[f[0]+"/"+f[1]], ledgerLine{f[0], f[1], Effect(f[2]), a, f[4]})
	}
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := ctx10(t)
	for i := range crashSessions {
		id := fmt.Sprintf("s%d", i+1)
		recs, err := j.Read(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		st := newState(id)
		for _, r := range recs {
			if err := st.apply(r); err != nil {
				t.Fatal(err)
			}
		}
		// Every session finishes.
		if st.Active != nil || st.Turn < 1 || st.Turns[1] == "" || len(st.Queue) != 0 {
			t.Fatalf("%s did not finish: turn %d active %+v queue %d", id, st.Turn, st.Active, len(st.Queue))
		}
		if st.Turns[1] != string(TurnCompleted) {
			t.Logf("%s: turn 1 %s (%s)", id, st.Turns[1], st.Last.Error)
		}
		started := map[string][]recToolStart{}
		ends := map[string]int{}
		resolves := map[string][]recResolve{}
		modelStarts := map[int][]int{} // step -> attempts
		modelOut := map[int]bool{}
		steers := 0
		for _, r := range recs {
			var err error
			switch r.Kind {
			case recToolStarted:
				err = decoded(r.Data, func(p recToolStart) { started[p.Call] = append(started[p.Call], p) })
			case recToolFinished:
				err = decoded(r.Data, func(p recToolEnd) { ends[p.Call]++ })
			case recApprovalResolved:
				err = decoded(r.Data, func(p recResolve) { resolves[p.Interrupt] = append(resolves[p.Interrupt], p) })
			case recModelStarted:
				err = decoded(r.Data, func(p recModelStart) { modelStarts[p.Step] = append(modelStarts[p.Step], p.Attempt) })
			case recModelOutput:
				err = decoded(r.Data, func(p recModelOut) { modelOut[p.Step] = true })
			case recUserMessage:
				err = decoded(r.Data, func(p recUser) {
					if p.Msg.Content == steerText {
						steers++
					}
				})
			}
			if err != nil {
				t.Errorf("%s: record %d (%s): %v", id, r.Seq, r.Kind, err)
			}
		}
		checkWriteOrder(t, id, recs)
		if steers > 1 {
			t.Errorf("%s: steering message stored %d times", id, steers)
		}
		// RunModel steps: attempts 1..k, and each ended with an output or
		// the turn failed.
		for step, atts := range modelStarts {
			for k, a := range atts {
				if a != k+1 {
					t.Errorf("%s: RunModel step %d attempts %v", id, step, atts)
				}
			}
			if !modelOut[step] && st.Turns[1] != string(TurnFailed) {
				t.Errorf("%s: RunModel step %d never produced output", id, step)
			}
		}
		for _, c := range st.Calls {
			key := id + "/" + c.ID
			lines := effects[key]
			if ends[c.ID] != 1 {
				t.Errorf("%s: %d tool_finished records", key, ends[c.ID])
			}
			if c.Status == "" {
				t.Errorf("%s: no outcome", key)
			}
			att := started[c.ID]
			for k, s := range att {
				if s.Attempt != k+1 {
					t.Errorf("%s: attempts %+v", key, att)
				}
			}
			// Invariant 11: a side effect happened only in an attempt the
			// journal recorded as started first.
			for _, l := range lines {
				if l.Attempt < 1 || l.Attempt > len(att) {
					t.Errorf("%s: side effect of attempt %d without a tool_started record", key, l.Attempt)
				}
			}
			switch c.Effect {
			case EffectNonIdempotentWrite, EffectUnclassified:
				if len(att) > 1 || len(lines) > 1 {
					t.Errorf("%s: single-attempt write started %d times, ran %d times", key, len(att), len(lines))
				}
			case EffectIdempotentWrite:
				want := idempotencyKey(id, 1, c.ID)
				for _, l := range lines {
					if l.Key != want {
						t.Errorf("%s: key %q, want %q", key, l.Key, want)
					}
				}
				for _, s := range att {
					if s.Key != want {
						t.Errorf("%s: recorded key %q", key, s.Key)
					}
				}
			}
			if len(att) > c.MaxAttempts {
				t.Errorf("%s: %d attempts, max %d", key, len(att), c.MaxAttempts)
			}
		}
		// The crash points of this session.
		bodies := cm.requestBodies()
		for _, k := range kills {
			if k.Session != id {
				continue
			}
			switch {
			case strings.HasPrefix(k.Kind, "TOOL "):
				c := st.call(1, k.Call)
				if c == nil {
					t.Errorf("%s: killed call %s unknown", id, k.Call)
					continue
				}
				lines := effects[id+"/"+k.Call]
				if k.Effect.retryable() {
					// Reads and idempotent writes run again (same key).
					if k.Attempt < c.MaxAttempts && len(started[k.Call]) <= k.Attempt && st.Turns[1] != string(TurnCancelled) {
						t.Errorf("%s: %s killed in attempt %d did not run again (%d attempts)", id, k.Call, k.Attempt, len(started[k.Call]))
					}
					if k.Attempt == c.MaxAttempts && c.Status != k.Effect.exhausted() && len(started[k.Call]) == k.Attempt {
						t.Errorf("%s: %s killed in its last attempt ended %s", id, k.Call, c.Status)
					}
				} else {
					// Single-attempt writes never run twice and end
					// outcome_unknown.
					if c.Status != StatusOutcomeUnknown {
						t.Errorf("%s: %s killed during its attempt ended %s", id, k.Call, c.Status)
					}
					want := 0
					if strings.HasPrefix(k.Kind, "TOOL done") {
						want = 1
					}
					if len(lines) != want {
						t.Errorf("%s: %s (%s) ran %d times, want %d", id, k.Call, k.Kind, len(lines), want)
					}
				}
			case k.Kind == "APPROVAL pending":
				// The approval survived: resolved once, after the restart.
				rs := resolves[k.Interrupt]
				if c := callOf(st, k.Interrupt); c != nil && c.Skipped && len(rs) == 0 {
					// An earlier write of its response did not succeed:
					// the call ended skipped before anyone approved it.
					continue
				}
				if len(rs) != 1 || !rs[0].Approved {
					t.Errorf("%s: interrupt %s resolutions %+v", id, k.Interrupt, rs)
				}
				c := st.call(1, rs0call(rs))
				if c != nil && len(effects[id+"/"+c.ID]) > 1 {
					t.Errorf("%s: approved call ran twice", id)
				}
			case k.Kind == "QUEUED":
				// The queued message survived and the model saw it.
				if steers != 1 || !hasText(historyOf(st), steerText) {
					t.Errorf("%s: steering message lost (%d stored)", id, steers)
				}
				seenByModel := slices.ContainsFunc(bodies, func(b string) bool {
					return strings.Contains(b, "session "+id+":") && strings.Contains(b, steerText)
				})
				if !seenByModel {
					t.Errorf("%s: the model never saw the steering message", id)
				}
			case k.Kind == "WRITE next":
				// Killed between two ordered writes: the restart resumes at
				// the next one, which runs (the earlier ones succeeded, and
				// ran once each: checked above for every call).
				c := st.call(1, k.Call)
				if c == nil || len(started[k.Call]) == 0 && st.Turns[1] == string(TurnCompleted) {
					t.Errorf("%s: killed before write %s, which never ran after the restart (%+v)", id, k.Call, c)
				}
			case k.Kind == "STEP RunModel" || k.Kind == "MODEL inflight":
				retried := false
				for _, atts := range modelStarts {
					retried = retried || len(atts) > 1
				}
				if !retried {
					t.Errorf("%s: killed during RunModel, no step ran again", id)
				}
			}
		}
	}
}

func rs0call(rs []recResolve) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].Call
}

func historyOf(st *state) []llm.Message {
	out := make([]llm.Message, len(st.History))
	for i, h := range st.History {
		out[i] = h.Msg.message()
	}
	return out
}

func callOf(st *state, interrupt string) *callState {
	for _, c := range st.Calls {
		if c.Interrupt == interrupt {
			return c
		}
	}
	return nil
}

// checkWriteOrder checks the order of writes in a session's journal: in a
// batch the model output marked ordered, a write starts only after every
// earlier write of the batch finished succeeded, and a write after one
// that did not succeed never starts and ends failed, skipped.
func checkWriteOrder(t *testing.T, id string, recs []store.Record) {
	t.Helper()
	type end struct {
		seq    int64
		status ToolStatus
	}
	firstStart := map[string]int64{}
	ends := map[string]end{}
	var batches [][]plannedCall
	for _, r := range recs {
		switch r.Kind {
		case recModelOutput:
			_ = decoded(r.Data, func(p recModelOut) {
				if p.Ordered {
					batches = append(batches, p.Calls)
				}
			})
		case recToolStarted:
			_ = decoded(r.Data, func(p recToolStart) {
				if _, ok := firstStart[p.Call]; !ok {
					firstStart[p.Call] = r.Seq
				}
			})
		case recToolFinished:
			_ = decoded(r.Data, func(p recToolEnd) { ends[p.Call] = end{r.Seq, p.Status} })
		}
	}
	if len(batches) == 0 {
		t.Errorf("%s: no ordered batch in the journal", id)
	}
	for _, calls := range batches {
		var earlier []string
		for _, c := range calls {
			if c.Effect == EffectRead {
				continue
			}
			failedBefore := ""
			for _, e := range earlier {
				if ends[e].status != StatusSucceeded {
					failedBefore = e
					break
				}
			}
			start, ran := firstStart[c.ID]
			switch {
			case failedBefore != "":
				if ran {
					t.Errorf("%s: write %s started after %s ended %s", id, c.ID, failedBefore, ends[failedBefore].status)
				}
				if e := ends[c.ID]; e.status != StatusFailed {
					t.Errorf("%s: write %s after %s ended %s, want failed (skipped, or not run)", id, c.ID, failedBefore, e.status)
				}
			case ran:
				for _, e := range earlier {
					if ends[e].seq == 0 || ends[e].seq > start {
						t.Errorf("%s: write %s started (seq %d) before %s ended (seq %d)", id, c.ID, start, e, ends[e].seq)
					}
				}
			}
			earlier = append(earlier, c.ID)
		}
	}
}
