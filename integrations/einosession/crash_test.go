package einosession_test

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// The crash suite runs eino sessions (a sequential tree: a triage agent
// that answers, then a clerk agent whose one response calls a read, an
// idempotent write, a non-idempotent write that waits for approval and an
// unclassified write) in a child process (this test binary re-executed
// with crashChildEnv set), and kills the child with SIGKILL at randomized
// points: in RunModel before the request and with it in flight, in
// CallTool of each effect before and after its side effect (the start of
// a later write, "WRITE next", is the point between two ordered writes),
// and while an approval waits. It restarts the child until every session
// finished, then checks what session/doc.go's Guarantees list: no
// single-attempt write ran twice, every call has one outcome, a side
// effect only in an attempt the journal recorded first, the writes in
// order (a write killed before runs after the restart), and every session
// finished.
//
// EINOSESSION_CRASH_POINTS sets how many crash points to try (default 16).

const (
	crashChildEnv = "EINOSESSION_CRASH_CHILD"
	crashDirEnv   = "EINOSESSION_CRASH_DIR"
	crashURLEnv   = "EINOSESSION_CRASH_MODEL_URL"
	crashSessions = 2
)

var crashKinds = []string{
	"STEP RunModel", "MODEL inflight",
	"TOOL start read", "TOOL start idempotent_write", "TOOL start non_idempotent_write", "TOOL start unclassified",
	"TOOL done read", "TOOL done idempotent_write", "TOOL done non_idempotent_write", "TOOL done unclassified",
	"APPROVAL pending", "WRITE next",
}

var (
	markMu sync.Mutex
	markIn *bufio.Reader
)

// mark prints a crash point and waits for the parent's go-ahead; the
// parent answers or kills the process there.
func mark(format string, args ...any) {
	markMu.Lock()
	defer markMu.Unlock()
	fmt.Fprintf(os.Stdout, "MARK "+format+"\n", args...)
	if _, err := markIn.ReadString('\n'); err != nil {
		os.Exit(4)
	}
}

// markedStep marks the start of every RunModel attempt.
type markedStep struct{ session.ModelStep }

func (s markedStep) RunModel(ctx context.Context, in session.StepInput) (*session.StepOutput, error) {
	mark("STEP RunModel %s", in.Session)
	return s.ModelStep.RunModel(ctx, in)
}

type crashIn struct {
	Order int `json:"order"`
}

// crashChild is the session process: it resumes or starts the sessions,
// approves what waits, and exits 0 once all finished.
func crashChild() int {
	markIn = bufio.NewReader(os.Stdin)
	dir, url := os.Getenv(crashDirEnv), os.Getenv(crashURLEnv)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 3 }
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		return fail(err)
	}
	defer j.Close()
	lf, err := os.OpenFile(filepath.Join(dir, "ledger"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer lf.Close()
	var lmu sync.Mutex
	client, err := providers.New(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: url, APIKey: "sk-test"},
		providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}), providers.WithTimeout(20*time.Second))
	if err != nil {
		return fail(err)
	}
	rn := einosession.New()
	effectTool := func(name string, effect session.Effect) tool.InvokableTool {
		t, err := utils.InferTool(name, name, func(ctx context.Context, in crashIn) (string, error) {
			c := callOf(ctx)
			if c.Attempt == 1 && (name == "refund" || name == "notify") {
				// Between two ordered writes: the earlier ones succeeded,
				// this one has not started its side effect.
				mark("WRITE next %s %s", c.Session, c.ID)
			}
			mark("TOOL start %s %s %s %d", c.Session, c.ID, c.Effect, c.Attempt)
			key := c.IdempotencyKey
			if key == "" {
				key = "-"
			}
			lmu.Lock()
			_, err := fmt.Fprintf(lf, "%s %s %s %d %s\n", c.Session, c.ID, c.Effect, c.Attempt, key)
			if err == nil {
				err = lf.Sync()
			}
			lmu.Unlock()
			if err != nil {
				return "", err
			}
			mark("TOOL done %s %s %s %d", c.Session, c.ID, c.Effect, c.Attempt)
			return fmt.Sprintf(`{"%s":"ok"}`, name), nil
		})
		if err != nil {
			panic(err)
		}
		return rn.Tool(t, einosession.Effect(effect))
	}
	model := func(name string) *chorus.ChatModel {
		cm, err := chorus.New(client, chorus.Config{Model: name})
		if err != nil {
			panic(err)
		}
		return cm
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	triage, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "triage", Description: "triage", Instruction: "Triage.", Model: model("triage")})
	if err != nil {
		return fail(err)
	}
	clerk, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "clerk", Description: "clerk", Instruction: "Act.", Model: model("clerk"),
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: toolsConfig(
			effectTool("lookup", session.EffectRead), effectTool("reserve", session.EffectIdempotentWrite),
			effectTool("refund", session.EffectNonIdempotentWrite), effectTool("notify", session.EffectUnclassified))}})
	if err != nil {
		return fail(err)
	}
	seq, err := adk.NewSequentialAgent(ctx, &adk.SequentialAgentConfig{Name: "support", Description: "support", SubAgents: []adk.Agent{triage, clerk}})
	if err != nil {
		return fail(err)
	}
	opt, err := rn.Options(seq, session.Options{Journal: j, Media: session.NewLocalMedia(filepath.Join(dir, "media")),
		Policy: map[string]session.ToolPolicy{"notify": {RequireApproval: session.Bool(false)}}, ModelAttempts: 5, RetryBackoff: 2 * time.Millisecond})
	if err != nil {
		return fail(err)
	}
	opt.ModelStep = markedStep{opt.ModelStep}
	opt.Tools = withCalls(opt.Tools)
	m, err := session.New(opt)
	if err != nil {
		return fail(err)
	}
	defer m.Close(context.Background())
	if _, err := m.Recover(ctx); err != nil {
		return fail(err)
	}
	ids := make([]string, crashSessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i+1)
		if _, err := m.Snapshot(ctx, ids[i]); errors.Is(err, session.ErrUnknownSession) {
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
				mark("APPROVAL pending %s %s", id, p.ID)
				if err := m.Resolve(ctx, id, p.ID, true, "auto"); err != nil && !errors.Is(err, session.ErrAlreadyResolved) && !errors.Is(err, session.ErrStaleInterrupt) {
					return fail(err)
				}
			}
			if s.Last.Turn >= 1 && s.Step == session.StepAwaitUserMessage && len(s.Queued) == 0 {
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

// The tools learn their session.Call from the context the child's own
// handler wrapper puts it in.
type callCtxKey struct{}

func callOf(ctx context.Context) session.Call {
	c, _ := ctx.Value(callCtxKey{}).(session.Call)
	return c
}

// withCalls wraps the session tools' handlers so the eino tool sees its
// session.Call.
func withCalls(tools []session.Tool) []session.Tool {
	for i := range tools {
		h := tools[i].Handler
		tools[i].Handler = func(ctx context.Context, c session.Call) (session.Result, error) {
			return h(context.WithValue(ctx, callCtxKey{}, c), c)
		}
	}
	return tools
}

func toolsConfig(tools ...tool.InvokableTool) compose.ToolsNodeConfig {
	var out []tool.BaseTool
	for _, t := range tools {
		out = append(out, t)
	}
	return compose.ToolsNodeConfig{Tools: out}
}

// ---- parent ----

// crashFront answers the child's model requests from the conversation,
// one at a time, offering each to the parent before forwarding it to an
// llmtest server.
type crashFront struct {
	srv      *llmtest.Server
	front    *httptest.Server
	inflight chan offer
	mu       sync.Mutex
}

type offer struct {
	session string
	wait    chan struct{}
}

func newCrashFront() *crashFront {
	cf := &crashFront{srv: llmtest.NewServer(), inflight: make(chan offer)}
	cf.front = httptest.NewServer(http.HandlerFunc(cf.serve))
	return cf
}

func (cf *crashFront) close() {
	cf.front.Close()
	cf.srv.Close()
}

func crashStep(body []byte) (llmtest.Step, string, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return llmtest.Step{}, "", err
	}
	sess, tools := "", 0
	for _, m := range req.Messages {
		var s string
		_ = json.Unmarshal(m.Content, &s)
		if rest, ok := strings.CutPrefix(s, "session "); ok && sess == "" {
			sess, _, _ = strings.Cut(rest, ":")
		}
		if m.Role == "tool" {
			tools++
		}
	}
	switch {
	case req.Model == "triage":
		return llmtest.Text("triaged " + sess), sess, nil
	case tools == 0:
		return llmtest.ToolCalls(llm.ToolCall{ID: "c1", Name: "lookup", Arguments: `{"order":7}`}, llm.ToolCall{ID: "c2", Name: "reserve", Arguments: `{"order":7}`},
			llm.ToolCall{ID: "c3", Name: "refund", Arguments: `{"order":7}`}, llm.ToolCall{ID: "c4", Name: "notify", Arguments: `{"order":7}`}), sess, nil
	}
	return llmtest.Text("done " + sess), sess, nil
}

func (cf *crashFront) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	step, sess, err := crashStep(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	wait := make(chan struct{})
	select {
	case cf.inflight <- offer{session: sess, wait: wait}:
	case <-r.Context().Done():
		return
	}
	select {
	case <-wait:
	case <-r.Context().Done():
		return
	}
	cf.srv.Push(step)
	up, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, cf.srv.URL+r.URL.Path, bytes.NewReader(body))
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
	_, _ = io.Copy(w, resp.Body)
}

type kill struct {
	kind, session, call string
	effect              session.Effect
}

func parseMarker(line string) kill {
	f := strings.Fields(strings.TrimPrefix(line, "MARK "))
	var k kill
	switch {
	case len(f) >= 6 && f[0] == "TOOL":
		k = kill{kind: f[0] + " " + f[1] + " " + f[4], session: f[2], call: f[3], effect: session.Effect(f[4])}
	case len(f) >= 4 && f[0] == "WRITE":
		k = kill{kind: "WRITE next", session: f[2], call: f[3]}
	case len(f) >= 4 && f[0] == "APPROVAL":
		k = kill{kind: "APPROVAL pending", session: f[2]}
	case len(f) >= 3 && f[0] == "STEP":
		k = kill{kind: "STEP RunModel", session: f[2]}
	default:
		k.kind = strings.Join(f, " ")
	}
	return k
}

// runChild runs the child and kills it at the nth point of kind; it
// returns the kill, or nil when the child finished.
func runChild(t *testing.T, cf *crashFront, dir, kind string, nth int) *kill {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashDirEnv+"="+dir, crashURLEnv+"="+cf.front.URL+"/v1")
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
	var killed *kill
	done, seen := false, 0
	timeout := time.After(120 * time.Second)
	for lines != nil {
		select {
		case line, open := <-lines:
			if !open {
				lines = nil
				break
			}
			if line == "ALL DONE" {
				done = true
				continue
			}
			if !strings.HasPrefix(line, "MARK ") || killed != nil {
				continue
			}
			if k := parseMarker(line); k.kind == kind {
				if seen++; seen == nth {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					killed = &k
					continue
				}
			}
			_, _ = io.WriteString(stdin, "go\n")
		case o := <-cf.inflight:
			if killed == nil && kind == "MODEL inflight" {
				if seen++; seen == nth {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					killed = &kill{kind: kind, session: o.session}
				}
			}
			close(o.wait)
		case <-timeout:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			t.Fatalf("child did not finish; stderr:\n%s", stderr.String())
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case o := <-cf.inflight:
			close(o.wait)
			continue
		case err := <-exited:
			if killed == nil && (err != nil || !done) {
				t.Fatalf("child failed: %v; stderr:\n%s", err, stderr.String())
			}
		}
		break
	}
	return killed
}

func TestCrashSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash suite skipped in -short mode")
	}
	points := 16
	if v := os.Getenv("EINOSESSION_CRASH_POINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("EINOSESSION_CRASH_POINTS=%q", v)
		}
		points = n
	}
	cf := newCrashFront()
	defer cf.close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("crash seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	hits := map[string]int{}
	tried, scenarios := 0, 0
	for tried < points {
		scenarios++
		dir := t.TempDir()
		var kills []kill
		for run := 0; ; run++ {
			if run > 40 {
				t.Fatalf("scenario %d: no end after %d restarts", scenarios, run)
			}
			kind := leastHit(rng, hits)
			k := runChild(t, cf, dir, kind, 1+rng.IntN(2))
			if k == nil {
				break
			}
			kills = append(kills, *k)
			hits[kind]++
			tried++
		}
		checkScenario(t, dir, kills)
	}
	var byKind []string
	for _, k := range crashKinds {
		byKind = append(byKind, fmt.Sprintf("%s=%d", k, hits[k]))
		if points >= len(crashKinds) && hits[k] == 0 {
			t.Errorf("crash kind %q never tried", k)
		}
	}
	t.Logf("crash points tried: %d in %d scenarios; by kind: %s", tried, scenarios, strings.Join(byKind, ", "))
}

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

// checkScenario checks the Guarantees against the journal and the ledger.
func checkScenario(t *testing.T, dir string, kills []kill) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "ledger"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ran := map[string][]string{} // session/call -> "attempt key"
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if f := strings.Fields(l); len(f) == 5 {
			ran[f[0]+"/"+f[1]] = append(ran[f[0]+"/"+f[1]], f[3]+" "+f[4])
		}
	}
	j, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := ctxT(t)
	for i := range crashSessions {
		id := fmt.Sprintf("s%d", i+1)
		snap, err := session.ReadSnapshot(ctx, j, id)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Last.Turn != 1 || snap.Step != session.StepAwaitUserMessage {
			t.Fatalf("%s did not finish: %+v, step %s", id, snap.Last, snap.Step)
		}
		if snap.Last.Status != session.TurnCompleted {
			t.Logf("%s: turn %s (%s)", id, snap.Last.Status, snap.Last.Error)
		}
		tl, err := session.ReadTimeline(ctx, j, id)
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]int{}
		ends := map[string]int{}
		startSeq := map[string]int64{}
		endSeq := map[string]int64{}
		endStatus := map[string]string{}
		for _, e := range tl {
			switch e.Kind {
			case "tool_started":
				started[e.Call]++
				if startSeq[e.Call] == 0 {
					startSeq[e.Call] = e.Seq
				}
			case "tool_finished":
				ends[e.Call]++
				endSeq[e.Call], endStatus[e.Call] = e.Seq, e.Status
			}
		}
		var earlier []session.ToolRecord
		for _, r := range snap.Tools {
			key := id + "/" + r.ID
			if ends[r.ID] != 1 || r.Status == "" {
				t.Errorf("%s: %d outcomes, status %q", key, ends[r.ID], r.Status)
			}
			if len(ran[key]) > started[r.ID] {
				t.Errorf("%s: %d side effects, %d attempts started", key, len(ran[key]), started[r.ID])
			}
			switch r.Effect {
			case session.EffectNonIdempotentWrite, session.EffectUnclassified:
				if started[r.ID] > 1 || len(ran[key]) > 1 {
					t.Errorf("%s: single-attempt write started %d times, ran %d", key, started[r.ID], len(ran[key]))
				}
			case session.EffectIdempotentWrite:
				for _, l := range ran[key] {
					if !strings.HasSuffix(l, " "+id+"/1/"+r.ID) {
						t.Errorf("%s: ran with key %q", key, l)
					}
				}
			}
			if r.Effect != session.EffectRead {
				for _, w := range earlier {
					if started[r.ID] > 0 && (endStatus[w.ID] != string(session.StatusSucceeded) || endSeq[w.ID] > startSeq[r.ID]) {
						t.Errorf("%s: started before the earlier write %s succeeded (%s)", key, w.ID, endStatus[w.ID])
					}
				}
				earlier = append(earlier, r)
			}
			if r.Agent != "clerk" {
				t.Errorf("%s: agent %q", key, r.Agent)
			}
		}
		for _, k := range kills {
			if k.session == id && k.kind == "WRITE next" && snap.Last.Status == session.TurnCompleted && started[k.call] == 0 {
				t.Errorf("%s/%s: killed before this write, which never ran after the restart", id, k.call)
			}
			if k.session != id || !strings.HasPrefix(k.kind, "TOOL ") || k.effect == session.EffectRead || k.effect == session.EffectIdempotentWrite {
				continue
			}
			for _, r := range snap.Tools {
				if r.ID == k.call && r.Status != session.StatusOutcomeUnknown {
					t.Errorf("%s/%s: killed during its single attempt, ended %s", id, k.call, r.Status)
				}
			}
		}
	}
}
