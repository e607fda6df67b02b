package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// startServe runs "chorus serve" in-process and returns its base URL once
// it printed that it listens; stop ends it and returns its exit code.
func startServe(t *testing.T, vars map[string]string, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }, width: func() int { return 0 }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, append([]string{"serve"}, args...)) }()
	re := regexp.MustCompile(`^listening (http://\S+)\n$`)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited %d: %s", code, errb.String())
		default:
		}
	}
	if base == "" {
		cancel()
		<-done
		t.Fatalf("no listening line:\n%s%s", out.String(), errb.String())
	}
	return base, func() (int, string) {
		cancel()
		return <-done, errb.String()
	}
}

func post(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	r := postResp(t, url, body, header...)
	return r.code, r.body
}

type postAnswer struct {
	code   int
	header http.Header
	body   string
}

func postResp(t *testing.T, url, body string, header ...string) postAnswer {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return postAnswer{resp.StatusCode, resp.Header, string(b)}
}

func TestServeWithoutKeysOnLoopback(t *testing.T) {
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0")
	code, body := post(t, base+"/v1/chat/completions", `{"model":"sim/echo","messages":[{"role":"user","content":"ping"}]}`)
	if code != 200 || !strings.Contains(body, `"content":"[simulated] ping"`) {
		t.Errorf("answer %d %s", code, body)
	}
	exit, stderr := stop()
	if exit != 0 || !strings.Contains(stderr, "loopback only") {
		t.Errorf("exit %d, stderr %s", exit, stderr)
	}
}

func TestServeRefusesOpenBindWithoutKeys(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--addr", addr)
		if code != 2 || !strings.Contains(stderr, "not a loopback address and no gateway key") {
			t.Errorf("%s: exit %d %q", addr, code, stderr)
		}
	}
}

func TestServeGatewayKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chorus.yaml")
	const yml = `gateway:
  keys:
    - name: ci
      key_env: CHORUS_TEST_GATEWAY_KEY
      models: [sim/*]
      rpm: 100
`
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CHORUS_TEST_GATEWAY_KEY": "gk-serve-test-1"}
	base, stop := startServe(t, vars, "--addr", "127.0.0.1:0", "--config", cfg)
	const body = `{"model":"sim/echo","messages":[{"role":"user","content":"ping"}]}`
	if code, b := post(t, base+"/v1/chat/completions", body); code != 401 {
		t.Errorf("without a key: %d %s", code, b)
	}
	if code, b := post(t, base+"/v1/chat/completions", body, "Authorization", "Bearer gk-serve-test-1"); code != 200 {
		t.Errorf("with the key: %d %s", code, b)
	}
	if code, b := post(t, base+"/v1/chat/completions", strings.Replace(body, "sim/echo", "openai/gpt-4.1-mini", 1), "x-api-key", "gk-serve-test-1"); code != 403 {
		t.Errorf("a model outside the key's list: %d %s", code, b)
	}
	exit, stderr := stop()
	if exit != 0 || strings.Contains(stderr, "gk-serve-test-1") {
		t.Errorf("exit %d, stderr %s", exit, stderr)
	}

	if code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--addr", "127.0.0.1:0", "--config", cfg); code != 2 || !strings.Contains(stderr, "$CHORUS_TEST_GATEWAY_KEY is empty") {
		t.Errorf("empty key_env: exit %d %q", code, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("gateway:\n  keys:\n    - name: x\n      sha256: abc\n"), 0o600)
	if code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--config", bad); code != 2 || !strings.Contains(stderr, "sha256: want 64 hex digits") {
		t.Errorf("bad hash: exit %d %q", code, stderr)
	}
}

// TestServeGatewayKeyBudget: budget_usd in gateway.keys is spent from the
// prices: section's costs: each call reserves its most possible cost
// before it runs, so the key is refused with a 429 insufficient_quota
// before its budget can be overrun, and the costs the client was told
// stay within it. A budget without prices is a config error.
func TestServeGatewayKeyBudget(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chorus.yaml")
	const yml = `prices:
  sim/echo: {input: 1000, output: 1000}
gateway:
  keys:
    - name: capped
      key_env: CHORUS_TEST_BUDGET_KEY
      budget_usd: 0.5
`
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, map[string]string{"CHORUS_TEST_BUDGET_KEY": "gk-budget-1"}, "--addr", "127.0.0.1:0", "--config", cfg)
	// $0.001 a token; a call reserves ~$0.17 (its bytes as tokens, and
	// its max_tokens): at most two fit in $0.5 at once, and every call
	// costs less than it reserved.
	const body = `{"model":"sim/echo","max_tokens":100,"messages":[{"role":"user","content":"ping"}]}`
	served, spent := 0, 0.0
	for ; served < 200; served++ {
		resp := postResp(t, base+"/v1/chat/completions", body, "Authorization", "Bearer gk-budget-1")
		if resp.code == 429 {
			if !strings.Contains(resp.body, "insufficient_quota") {
				t.Fatalf("refused: %s", resp.body)
			}
			break
		}
		if resp.code != 200 {
			t.Fatalf("call %d: %d %s", served, resp.code, resp.body)
		}
		c, err := strconv.ParseFloat(resp.header.Get("x-chorus-cost-usd"), 64)
		if err != nil || c <= 0 {
			t.Fatalf("x-chorus-cost-usd %q", resp.header.Get("x-chorus-cost-usd"))
		}
		spent += c
	}
	if served == 0 || served == 200 || spent > 0.5 || spent < 0.5-0.2 {
		t.Errorf("%d calls served, $%v spent of $0.5", served, spent)
	}
	if exit, stderr := stop(); exit != 0 {
		t.Errorf("exit %d, stderr %s", exit, stderr)
	}
	noPrices := filepath.Join(dir, "noprices.yaml")
	os.WriteFile(noPrices, []byte("gateway:\n  keys:\n    - name: x\n      sha256: "+strings.Repeat("ab", 32)+"\n      budget_usd: 5\n"), 0o600)
	if code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--addr", "127.0.0.1:0", "--config", noPrices); code != 2 || !strings.Contains(stderr, "budget_usd needs prices") {
		t.Errorf("budget without prices: exit %d %q", code, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("gateway:\n  keys:\n    - name: x\n      sha256: "+strings.Repeat("ab", 32)+"\n      budget_usd: -1\n"), 0o600)
	if code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--config", bad); code != 2 || !strings.Contains(stderr, "budget_usd: want an amount") {
		t.Errorf("negative budget: exit %d %q", code, stderr)
	}
}

// TestServeFanOut: gateway.fan_out in chorus.yaml names a fan-out alias,
// answered with a choice per model.
func TestServeFanOut(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "chorus.yaml")
	if err := os.WriteFile(cfg, []byte("gateway:\n  fan_out:\n    compare: [sim/alpha, sim/beta]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0", "--config", cfg)
	code, body := post(t, base+"/v1/chat/completions", `{"model":"compare","messages":[{"role":"user","content":"ping"}]}`)
	if code != 200 || !strings.Contains(body, `"index":0`) || !strings.Contains(body, `"index":1`) ||
		!strings.Contains(body, "[simulated alpha]") || !strings.Contains(body, "[simulated beta]") {
		t.Errorf("fan-out: %d %s", code, body)
	}
	if exit, stderr := stop(); exit != 0 {
		t.Errorf("exit %d, stderr %s", exit, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("gateway:\n  fan_out:\n    compare: sim/alpha\n"), 0o600)
	if code, _, stderr := runCLI(t, context.Background(), nil, "serve", "--config", bad); code != 2 || !strings.Contains(stderr, "gateway.fan_out.compare: want a list of models") {
		t.Errorf("a fan-out that is not a list: exit %d %q", code, stderr)
	}
}
