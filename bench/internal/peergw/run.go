package peergw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// Gateways are the measured paths in report order: straight to the
// upstream, then each gateway.
var Gateways = []string{"direct", "proxy", "chorus", "portkey"}

// Protos are the client-side protocols: HTTP/1.1, and HTTP/2 without TLS
// with prior knowledge (each gateway talks HTTP/1.1 to the upstream).
var Protos = []string{"http1", "h2c"}

// Modes are the two kinds of request.
var Modes = []string{"buffered", "streamed"}

// PortkeyVersion is the @portkey-ai/gateway version pinned by
// bench/testdata/portkey/package.json.
const PortkeyVersion = "1.15.2"

// PortkeyEntry is the package's server, under the install folder.
const PortkeyEntry = "node_modules/@portkey-ai/gateway/build/start-server.js"

// Config sizes one run of the scenario.
type Config struct {
	// Self is an executable that calls MaybeServe first (benchrun, or the
	// test binary): the upstream, the proxy and Chorus's gateway are
	// processes of it.
	Self string
	// PortkeyDir is the folder @portkey-ai/gateway is installed in (it
	// holds node_modules); when the package is not there, its cases are
	// reported as not run, saying so.
	PortkeyDir string
	// Node is the Node.js binary (default "node" on PATH).
	Node string
	// Requests is the number of buffered requests at concurrency 1
	// (latency), Streams the number of streams at concurrency 1, Deltas
	// the deltas of each (defaults 1000, 100, 100).
	Requests, Streams, Deltas int
	// Concurrency is the closed loop's (default 32), held for Duration
	// (default 2 s) per case: CPU per request and throughput.
	Concurrency int
	Duration    time.Duration
	// Runs is how many times every case is measured, each with fresh
	// processes (default 1); values are the medians.
	Runs int
	// ProfileDir, when set, has Chorus's gateway and the proxy write a CPU
	// profile of each case there (chorus-<proto>-<mode>-<run>.pprof,
	// proxy-...).
	ProfileDir string
	// Only, when set, limits the gateways measured (direct is always).
	Only []string
	// Log, when set, is told of each case.
	Log func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Node == "" {
		c.Node = "node"
	}
	if c.Requests <= 0 {
		c.Requests = 1000
	}
	if c.Streams <= 0 {
		c.Streams = 100
	}
	if c.Deltas <= 0 {
		c.Deltas = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Case is one gateway, protocol and mode: its values (medians over the
// runs), or why it could not be measured.
//
// Buffered values: p50_us, p99_us (latency at concurrency 1), rps and
// cpu_us (the gateway process's CPU per request in the closed loop; not
// for direct), requests (how many the loop completed). Streamed:
// ttfd_p50_us, ttfd_p99_us, end_p50_us, end_p99_us (concurrency 1),
// streams_per_s, cpu_us (per stream) and cpu_ns_per_delta (the closed
// loop).
type Case struct {
	Gateway string             `json:"gateway"`
	Proto   string             `json:"proto"`
	Mode    string             `json:"mode"`
	Values  map[string]float64 `json:"values,omitempty"`
	Runs    int                `json:"runs"`
	Err     string             `json:"err,omitempty"`
}

// Run measures every case. It fails only when the upstream cannot start;
// a gateway that fails a case has the case's Err set.
func Run(ctx context.Context, cfg Config) ([]Case, error) {
	cfg.defaults()
	up, err := startGo(ctx, cfg.Self, serveSpec{Kind: "upstream", Deltas: cfg.Deltas})
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	defer up.stop()
	var cases []Case
	for _, proto := range Protos {
		for _, mode := range Modes {
			for _, gw := range Gateways {
				if gw != "direct" && len(cfg.Only) > 0 && !slices.Contains(cfg.Only, gw) {
					continue
				}
				c := Case{Gateway: gw, Proto: proto, Mode: mode, Values: map[string]float64{}}
				samples := map[string][]float64{}
				for run := range cfg.Runs {
					if ctx.Err() != nil {
						return cases, ctx.Err()
					}
					v, err := measureCase(ctx, cfg, up.url, gw, proto, mode, run)
					if err != nil {
						c.Err = err.Error()
						break
					}
					c.Runs++
					for k, x := range v {
						samples[k] = append(samples[k], x)
					}
				}
				for k, s := range samples {
					c.Values[k] = median(s)
				}
				cfg.Log("[peergw %s %s] %s: %s", proto, mode, gw, describe(c))
				cases = append(cases, c)
			}
		}
	}
	return cases, nil
}

func describe(c Case) string {
	if c.Err != "" {
		return "ERROR " + c.Err
	}
	keys := make([]string, 0, len(c.Values))
	for k := range c.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%.4g ", k, c.Values[k])
	}
	return b.String()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// proc is one running server process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	pid   int
	node  bool
	done  chan struct{}
	log   *lockedBuffer // Node's output
}

// lockedBuffer is a process's output, written by exec's copying
// goroutine and read by the scenario.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

// firstError is the first line of the output that names an error (with
// the line after it), or "".
func (l *lockedBuffer) firstError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(l.b.String()), "\n")
	for i, line := range lines {
		if strings.Contains(line, "Error") || strings.Contains(line, "error") {
			if i+1 < len(lines) {
				line += " " + strings.TrimSpace(lines[i+1])
			}
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// stop ends the process: a Go server exits when its standard input
// closes (and writes its profile); Node is killed by its pid.
func (p *proc) stop() {
	_ = p.stdin.Close()
	if p.node {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startGo starts one of this scenario's Go servers (a process of self)
// and waits for its address.
func startGo(ctx context.Context, self string, spec serveSpec) (*proc, error) {
	b, _ := json.Marshal(spec)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveEnv+"="+string(b))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid, done: make(chan struct{})}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "http://") {
			p.stop()
			return nil, fmt.Errorf("%s server did not start: %s", spec.Kind, strings.TrimSpace(stderr.String()))
		}
		p.url = l
		return p, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	p.stop()
	return nil, fmt.Errorf("%s server did not start in time", spec.Kind)
}

// startPortkey starts @portkey-ai/gateway's server under Node on a free
// loopback port and waits until it accepts connections.
func startPortkey(ctx context.Context, cfg Config) (*proc, error) {
	entry := filepath.Join(cfg.PortkeyDir, PortkeyEntry)
	if cfg.PortkeyDir == "" {
		return nil, errors.New("not installed (no install folder given: make bench-gateways installs it)")
	}
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("not installed at %s (make bench-gateways installs it)", entry)
	}
	if _, err := exec.LookPath(cfg.Node); err != nil {
		return nil, fmt.Errorf("no Node.js: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(cfg.Node, entry, "--port="+strconv.Itoa(port), "--headless")
	cmd.Env = append(os.Environ(), "NODE_ENV=production")
	out := &lockedBuffer{}
	cmd.Stderr, cmd.Stdout = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid, node: true, done: make(chan struct{}), url: "http://127.0.0.1:" + strconv.Itoa(port), log: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-p.done:
			return nil, fmt.Errorf("portkey exited: %s", out.firstError())
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			_ = c.Close()
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop()
	return nil, errors.New("portkey did not listen in time")
}

// procCPU is the process's user and system CPU so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 10 ms).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("bad /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat")
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// target is one path to send requests on.
type target struct {
	url    string
	model  string
	header http.Header
	hc     *http.Client
}

func newHTTPClient(proto string) *http.Client {
	if proto == "h2c" {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: p, DisableCompression: true, MaxIdleConnsPerHost: 64}
		return &http.Client{Transport: tr}
	}
	return clients.NewHTTPClient(64)
}

func measureCase(ctx context.Context, cfg Config, upURL, gw, proto, mode string, run int) (map[string]float64, error) {
	t := target{url: upURL + "/v1/chat/completions", model: "m", header: http.Header{}, hc: newHTTPClient(proto)}
	defer t.hc.CloseIdleConnections()
	t.header.Set("Content-Type", "application/json")
	t.header.Set("Authorization", "Bearer k")
	var p *proc
	var err error
	switch gw {
	case "direct":
	case "proxy":
		spec := serveSpec{Kind: "proxy", Upstream: upURL}
		if cfg.ProfileDir != "" {
			spec.Profile = filepath.Join(cfg.ProfileDir, fmt.Sprintf("proxy-%s-%s-%d.pprof", proto, mode, run))
		}
		p, err = startGo(ctx, cfg.Self, spec)
	case "chorus":
		spec := serveSpec{Kind: "chorus", Upstream: upURL}
		if cfg.ProfileDir != "" {
			spec.Profile = filepath.Join(cfg.ProfileDir, fmt.Sprintf("chorus-%s-%s-%d.pprof", proto, mode, run))
		}
		p, err = startGo(ctx, cfg.Self, spec)
		t.model = clients.ChorusConfig(corpus.OpenAI, upURL).ID + "/m"
	case "portkey":
		p, err = startPortkey(ctx, cfg)
		t.header.Set("x-portkey-provider", "openai")
		t.header.Set("x-portkey-custom-host", upURL+"/v1")
	default:
		return nil, fmt.Errorf("unknown gateway %q", gw)
	}
	if err != nil {
		return nil, err
	}
	if p != nil {
		defer p.stop()
		t.url = p.url + "/v1/chat/completions"
	}
	v, err := t.measure(ctx, cfg, p, mode)
	if err != nil && p != nil && p.log != nil {
		time.Sleep(300 * time.Millisecond) // Node writes its log asynchronously
		if l := p.log.firstError(); l != "" {
			err = fmt.Errorf("%w (its log: %.300s)", err, l)
		}
	}
	return v, err
}

// measure runs the case's loops on t, through p when not direct.
func (t *target) measure(ctx context.Context, cfg Config, p *proc, mode string) (map[string]float64, error) {
	var err error
	one := t.buffered
	if mode == "streamed" {
		one = func(ctx context.Context) (time.Duration, error) { return t.stream(ctx, cfg.Deltas) }
	}
	// Warm up: connections, the runtime's learnt state, Node's JIT.
	warm := 200
	if mode == "streamed" {
		warm = 20
	}
	for i := range warm {
		if _, err := one(ctx); err != nil {
			if i == 0 {
				return nil, fmt.Errorf("the first request failed: %w", err)
			}
			return nil, fmt.Errorf("warm-up request %d failed: %w", i+1, err)
		}
	}
	v := map[string]float64{}
	n := cfg.Requests
	if mode == "streamed" {
		n = cfg.Streams
	}
	lat := make([]float64, 0, n)
	ttfd := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		first, err := one(ctx)
		if err != nil {
			return nil, fmt.Errorf("at concurrency 1: %w", err)
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
		ttfd = append(ttfd, float64(first.Nanoseconds())/1e3)
	}
	sort.Float64s(lat)
	sort.Float64s(ttfd)
	if mode == "buffered" {
		v["p50_us"], v["p99_us"] = pct(lat, 0.50), pct(lat, 0.99)
	} else {
		v["ttfd_p50_us"], v["ttfd_p99_us"] = pct(ttfd, 0.50), pct(ttfd, 0.99)
		v["end_p50_us"], v["end_p99_us"] = pct(lat, 0.50), pct(lat, 0.99)
	}
	// The closed loop: Concurrency callers back to back for Duration.
	var cpu0 time.Duration
	if p != nil {
		if cpu0, err = procCPU(p.pid); err != nil {
			return nil, err
		}
	}
	var done, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	lctx, cancel := context.WithCancel(ctx)
	t0 := time.Now()
	deadline := t0.Add(cfg.Duration)
	for range cfg.Concurrency {
		wg.Go(func() {
			for time.Now().Before(deadline) && lctx.Err() == nil {
				if _, err := one(lctx); err != nil {
					if failed.Add(1) == 1 {
						once.Do(func() { firstErr = err })
					}
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	cancel()
	if firstErr != nil {
		return nil, fmt.Errorf("at concurrency %d: %w", cfg.Concurrency, firstErr)
	}
	cnt := float64(done.Load())
	if mode == "buffered" {
		v["rps"] = cnt / wall.Seconds()
		v["requests"] = cnt
	} else {
		v["streams_per_s"] = cnt / wall.Seconds()
		v["streams"] = cnt
	}
	if p != nil {
		cpu1, err := procCPU(p.pid)
		if err != nil {
			return nil, err
		}
		us := float64((cpu1 - cpu0).Microseconds()) / max(cnt, 1)
		v["cpu_us"] = us
		if mode == "streamed" {
			v["cpu_ns_per_delta"] = us * 1e3 / float64(cfg.Deltas)
		}
	}
	return v, nil
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}

func (t *target) request(ctx context.Context, stream bool) (*http.Response, error) {
	body := `{"model":"` + t.model + `","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1024`
	if stream {
		body += `,"stream":true`
	}
	body += "}"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = t.header.Clone()
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// buffered sends one buffered request and checks the answer's text.
func (t *target) buffered(ctx context.Context) (time.Duration, error) {
	resp, err := t.request(ctx, false)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("answer: %w: %.200s", err, b)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content != corpus.ShortText {
		return 0, fmt.Errorf("answer: %.200s", b)
	}
	return 0, nil
}

var contentKey = []byte(`"content":"`)

// stream sends one streamed request, reads its SSE lines and counts the
// chunks that carry text; it returns the time to the first of them.
func (t *target) stream(ctx context.Context, deltas int) (time.Duration, error) {
	t0 := time.Now()
	resp, err := t.request(ctx, true)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 4096)
	var first time.Duration
	n := 0
	partial := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && !partial && bytes.HasPrefix(line, []byte("data:")) {
			if i := bytes.Index(line, contentKey); i >= 0 && i+len(contentKey) < len(line) && line[i+len(contentKey)] != '"' {
				if n == 0 {
					first = time.Since(t0)
				}
				n++
			}
		}
		partial = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !partial {
			if err == io.EOF {
				break
			}
			return 0, err
		}
	}
	if n != deltas {
		return 0, fmt.Errorf("stream: %d text chunks, want %d", n, deltas)
	}
	return first, nil
}
