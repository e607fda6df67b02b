package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// serveProc is a running "chorus serve" process.
type serveProc struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncbuf.Buffer
}

var listening = regexp.MustCompile(`listening (http://\S+)`)

func startServeProc(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	p := &serveProc{cmd: cmd, done: make(chan struct{}), out: &syncbuf.Buffer{}}
	cmd.Stderr = p.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case p.url = <-ready:
		return p
	case <-p.done:
		t.Fatalf("chorus serve exited: %s", p.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("chorus serve not ready after 60s: %s", p.out.String())
	}
	return nil
}

func (p *serveProc) kill() {
	_ = p.cmd.Process.Kill() // SIGKILL
	<-p.done
}

// stop ends the process with SIGTERM, as an operator would.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("chorus serve did not stop on SIGTERM: %s", p.out.String())
		p.kill()
	}
}

// TestFleetOfThreeServers is the fleet end to end: three chorus serve
// processes in one cluster on one PostgreSQL, a client spreading requests
// over them. A
// key's budget is never overrun and the ledger holds exactly the costs
// the clients were told; after SIGKILL of one replica mid-load the ledger
// is never below what the clients were told, and above it by at most what
// the killed replica held reserved; a restart of all three keeps the
// spend; a key of 30 requests a minute gets at most 30 in each minute
// across the three.
func TestFleetOfThreeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and three chorus serve processes")
	}
	bin := buildChorus(t)
	dsn := pgtest.SchemaDSN(t)
	up := llmtest.NewServer()
	defer up.Close()
	up.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Step{Reply: &llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 20, CompletionTokens: 100}}}
	})
	cfg := writeConfig(t, up, "  store: "+dsn+"\n", `    - name: capped
      key_env: GK_CAPPED
      budget_usd: 0.2
      budget_period: month
    - name: paced
      key_env: GK_PACED
      rpm: 30
`) // fleetbatch_test.go
	env := cleanEnv("UP_KEY=sk-up-secret", "GK_CAPPED=gk-capped-fleet", "GK_PACED=gk-paced-fleet")
	addrs := freePairs(t, 3) // the three are members of one cluster too
	start := func() []*serveProc {
		var ps []*serveProc
		for _, a := range addrs {
			ps = append(ps, startServeProc(t, bin, env, "--config", cfg, "--token", "op-token-fleet",
				"--cluster", "fleettest", "--bind", a, "--peers", strings.Join(addrs, ","), "--lease-ttl", "1s"))
		}
		return ps
	}
	ps := start()
	client := &http.Client{Timeout: 30 * time.Second}
	call := func(url, key string, maxTokens int) (int, http.Header, string, error) {
		body := fmt.Sprintf(`{"model":"up/m","max_tokens":%d,"messages":[{"role":"user","content":"hello"}]}`, maxTokens)
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), key) || strings.Contains(string(b), "sk-up-secret") {
			t.Errorf("a key in an answer: %s", b)
		}
		return resp.StatusCode, resp.Header, string(b), nil
	}

	// The budget: $0.00084 per answer (20 in, 100 out), about $0.00105
	// reserved. Replica 0 is killed after 40 answers.
	var told atomic.Int64
	var served, refused atomic.Int64
	var killed atomic.Bool
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := ps[(w+i)%3]
				if killed.Load() && p == ps[0] {
					continue
				}
				code, h, body, err := call(p.url, "gk-capped-fleet", 100)
				if err != nil {
					if p == ps[0] && killed.Load() {
						continue // the killed replica's calls in flight
					}
					t.Errorf("call: %v", err)
					return
				}
				switch {
				case code == 200:
					c, _ := strconv.ParseFloat(h.Get("x-chorus-cost-usd"), 64)
					told.Add(keystore.ToNano(c))
					if served.Add(1) == 40 {
						killed.Store(true)
						ps[0].kill()
					}
				case code == 429 && strings.Contains(body, "insufficient_quota"):
					refused.Add(1)
					return
				case p == ps[0] && killed.Load():
				default:
					t.Errorf("%d %s", code, body)
					return
				}
			}
		})
	}
	wg.Wait()
	ps[1].stop(t)
	ps[2].stop(t)
	st, err := keystore.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := st.ByName(context.Background(), "capped")
	if err != nil {
		t.Fatal(err)
	}
	period := keystore.Monthly.ID(time.Now())
	sp, err := st.SpendOf(context.Background(), k.ID, period)
	if err != nil {
		t.Fatal(err)
	}
	used := sp.Spent + sp.Reserved // the killed replica's reservation counts until reconciled
	// What the killed replica could hold: the reservations of its calls
	// in flight (two workers' worth) and two hundredths of the budget.
	bound := keystore.ToNano(0.2*0.02) + 2*keystore.ToNano(0.00105)
	t.Logf("served %d, refused %d; told $%.6f, ledger spent $%.6f + reserved $%.6f (bound $%.6f)", served.Load(), refused.Load(),
		keystore.FromNano(told.Load()), keystore.FromNano(sp.Spent), keystore.FromNano(sp.Reserved), keystore.FromNano(bound))
	if used < told.Load() {
		t.Fatalf("the ledger (%d nUSD) is below what the clients were told (%d)", used, told.Load())
	}
	if used > told.Load()+bound {
		t.Fatalf("the ledger (%d nUSD) passes what the clients were told (%d) by more than %d", used, told.Load(), bound)
	}
	if used > keystore.ToNano(0.2) {
		t.Fatalf("the budget was overrun: %d nUSD", used)
	}
	if refused.Load() == 0 {
		t.Fatal("the budget was never spent")
	}

	// A restart of all three keeps the spend: only what was left of the
	// budget is served, then the key is refused.
	ps = start()
	more := 0
	for ; more < 100; more++ {
		code, _, body, err := call(ps[more%3].url, "gk-capped-fleet", 100)
		if err != nil {
			t.Fatal(err)
		}
		if code == 429 && strings.Contains(body, "insufficient_quota") {
			break
		}
		if code != 200 {
			t.Fatalf("after a restart: %d %s", code, body)
		}
	}
	if left := keystore.ToNano(0.2) - used; more == 100 || keystore.NanoUSD(more)*keystore.ToNano(0.00084) > left {
		t.Fatalf("after a restart %d more calls were served; $%.6f was left", more, keystore.FromNano(left))
	}

	// The paced key: at most 30 a minute window across the three.
	perWindow := map[int64]int{}
	var mu sync.Mutex
	for w := range 3 {
		wg.Go(func() {
			for i := range 30 {
				before := time.Now().Unix() / 60
				code, _, _, err := call(ps[(w+i)%3].url, "gk-paced-fleet", 10)
				after := time.Now().Unix() / 60
				if err != nil {
					t.Error(err)
					return
				}
				if code == 200 {
					mu.Lock()
					if before == after {
						perWindow[before]++
					} else {
						perWindow[-1]++ // across a boundary: counted apart
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for w, n := range perWindow {
		total += n
		if w >= 0 && n > 30 {
			t.Errorf("%d requests accepted in minute %d of a 30 rpm key", n, w)
		}
	}
	if total == 0 || (len(perWindow) == 1 && total != 30) {
		t.Errorf("accepted per window: %v, want 30 in a window", perWindow)
	}

	// A key made with chorus keys through one replica works on the other
	// two within a second; revoked, all three refuse it within a second.
	code, secret, stderr := runCLI(t, context.Background(), nil, "keys", "create", "--name", "late", "--rpm", "100", "--addr", ps[0].url, "--token", "op-token-fleet")
	secret = strings.TrimSpace(secret)
	if code != 0 || !strings.HasPrefix(secret, "sk-chorus-") {
		t.Fatalf("chorus keys create: exit %d, %q, %s", code, secret, stderr)
	}
	within := func(what string, want int) {
		t.Helper()
		end := time.Now().Add(time.Second)
		for {
			all := true
			for _, p := range ps {
				if c, _, _, err := call(p.url, secret, 10); err != nil || c != want {
					all = false
				}
			}
			if all {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: not on every replica within a second", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	within("a key created through replica 0", 200)
	late, err := st.ByName(context.Background(), "late")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, context.Background(), nil, "keys", "revoke", late.ID, "--addr", ps[1].url, "--token", "op-token-fleet"); code != 0 {
		t.Fatalf("chorus keys revoke: exit %d %s", code, stderr)
	}
	within("a key revoked through replica 1", 401)
	for _, p := range ps {
		p.stop(t)
		if strings.Contains(p.out.String(), secret) || strings.Contains(p.out.String(), "gk-capped-fleet") {
			t.Errorf("a gateway key in a replica's output")
		}
	}
}

// TestServeJoinsACluster: chorus serve --cluster makes each replica a
// member of one Proto.Actor cluster (the flags of chorus node): both list
// each other as members on the console's Cluster API, and the provider
// key both use has one budget owner, the same seen from either.
func TestServeJoinsACluster(t *testing.T) {
	bin := buildChorus(t)
	addrs := freePairs(t, 2)
	env := cleanEnv()
	var ps []*serveProc
	for _, a := range addrs {
		ps = append(ps, startServeProc(t, bin, env, "--cluster", "servetest", "--bind", a, "--peers", strings.Join(addrs, ","), "--lease-ttl", "1s"))
	}
	type view struct {
		Members []string              `json:"members"`
		Owners  []console.BudgetOwner `json:"budget_owners"`
	}
	read := func(p *serveProc) (v view) {
		resp, err := http.Get(p.url + "/api/console/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v
	}
	// A call on each: the sim key's budget owner is made.
	for _, p := range ps {
		req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(`{"model":"sim/echo","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a call on a member: %d", resp.StatusCode)
		}
	}
	end := time.Now().Add(20 * time.Second)
	for {
		a, b := read(ps[0]), read(ps[1])
		if len(a.Members) == 2 && len(b.Members) == 2 && len(a.Owners) > 0 && len(b.Owners) > 0 && a.Owners[0].Member == b.Owners[0].Member {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("members %v / %v, owners %+v / %+v", a.Members, b.Members, a.Owners, b.Owners)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(ps[0].out.String(), `member of "servetest"`) {
		t.Errorf("stderr does not say it joined: %s", ps[0].out.String())
	}
	for _, p := range ps {
		p.stop(t)
	}
}
