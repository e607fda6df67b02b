package console

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/internal/version"
	"github.com/chorusrt/chorus/sim"
)

// chromiumPath finds Debian's chromium. Under CI=true a missing browser
// fails the test; elsewhere the test is skipped with how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is missing: the browser tests need it under CI (.ci/run installs it: apt-get install -y chromium)")
	}
	t.Skip("chromium is missing: install Debian's chromium (apt-get install -y chromium) to run the console's browser tests")
	return ""
}

// artifacts is where screenshots go: $CHORUS_TEST_ARTIFACTS/<test>, else
// the test's temporary directory. CHORUS_CONSOLE_SHOTS, when set, is a
// directory that gets a copy (make the README's screenshots with it),
// relative to the module's root unless absolute.
func artifacts(t *testing.T) string {
	if d := os.Getenv("CHORUS_TEST_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// browser starts a headless chromium and returns a tab's context. The
// browser process is killed and reaped in the test's cleanup.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 820),
		chromedp.Flag("hide-scrollbars", true), chromedp.Flag("mute-audio", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// pageLog gathers what the pages write to the browser's console that is an
// error: an uncaught exception, console.error, or an entry of the browser's
// log at level error (a resource answered 404 or failed to load is one).
type pageLog struct {
	mu   sync.Mutex
	errs []string
}

// watchConsole starts gathering the tab's console errors until the test ends.
func watchConsole(t *testing.T, ctx context.Context) *pageLog {
	t.Helper()
	l := &pageLog{}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	msgs := chromedp.Console(cctx) // subscribed now: nothing after this is lost
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				l.mu.Lock()
				l.errs = append(l.errs, m.String()+" "+m.URL)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

// clean fails the test if any console error was logged since the last check
// (naming the page), and starts the next page's count afresh.
func (l *pageLog) clean(t *testing.T, page string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // the page's last requests are answered
	l.mu.Lock()
	errs := l.errs
	l.errs = nil
	l.mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("page %s logged %d console error(s):\n%s", page, len(errs), strings.Join(errs, "\n"))
	}
}

// within runs steps with a timeout.
func within(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// changes waits until the JS expression's value differs from its first
// value, without any reload: the page updated itself.
func changes(t *testing.T, ctx context.Context, what, js string) (string, string) {
	t.Helper()
	first := evalJS[string](t, ctx, js)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		if now := evalJS[string](t, ctx, js); now != first {
			return first, now
		}
	}
	t.Fatalf("%s did not change on its own (stayed %q)", what, first)
	return "", ""
}

func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if shots := os.Getenv("CHORUS_CONSOLE_SHOTS"); shots != "" {
		if !filepath.IsAbs(shots) {
			// Relative to the module's root, where the README's command
			// runs (go test runs in the package's directory).
			shots = filepath.Join("..", shots)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s: %d bytes", name, len(png))
}

// TestBrowser drives the console in a real chromium: a runtime on the
// simulator with a running batch and a session waiting for approval. The
// credential table and the batch progress change on their own; Approve
// resolves the call and the session finishes; the hostile tool result
// never runs as script; every page is captured.
func TestBrowser(t *testing.T) {
	k := newKit(t, kitOpts{sim: sim.Options{RPM: 6000, TPM: 400000, Latency: 40 * time.Millisecond}, tick: 250 * time.Millisecond})
	ctx := browser(t)
	dir := artifacts(t)
	plog := watchConsole(t, ctx)

	// A batch that runs for a while.
	var lines strings.Builder
	const n = 3000
	lines.WriteString(`{"custom_id":"bad","method":"POST","url":"/v1/chat/completions","body":{"messages":"<b>not a list</b>"}}` + "\n")
	for i := range n {
		fmt.Fprintf(&lines, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/echo","messages":[{"role":"user","content":"question %d"}]}}`+"\n", i, i)
	}
	out, err := batch.OpenOutput(filepath.Join(t.TempDir(), "out.jsonl"), batch.Create)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stopBatch := context.WithCancel(context.Background())
	tr := k.reg.Track("questions.jsonl", n+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := batch.Run(bctx, batch.Job{Input: strings.NewReader(lines.String()), InputName: "questions.jsonl", Output: out, Runner: k.rt, Observe: tr.Observe, Concurrency: 2, Prices: &batch.Prices{Models: testPrices}})
		tr.Finish(err)
	}()
	t.Cleanup(func() {
		stopBatch()
		wg.Wait()
		out.Close()
	})
	in := k.refundSession("refund-7")
	k.refundSession("refund-8")

	// Logging in with the form.
	within(t, ctx, 20*time.Second, "login",
		chromedp.Navigate(k.srv.URL+PagePrefix+"credentials"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#credentials tbody tr[data-key]")),
	)
	plog.clean(t, "login, credentials")
	// The footer names the build (what chorus version and GET /version say).
	if got, want := evalJS[string](t, ctx, `document.querySelector('footer#version').textContent`), "Chorus "+version.Get().String(); got != want {
		t.Errorf("footer %q, want %q", got, want)
	}
	// Credentials: the requests count and the budget left move by
	// themselves; the chart is drawn.
	before, after := changes(t, ctx, "the credential table", `document.querySelector('#credentials tbody tr[data-key] td:nth-child(5)').textContent`)
	t.Logf("credential requests: %s -> %s", before, after)
	changes(t, ctx, "the requests left", `document.querySelector('#credentials tbody tr[data-key] td:nth-child(9)').textContent`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#credentials svg.spark polyline').length`); n < 1 {
		t.Fatal("no window chart")
	}
	time.Sleep(3 * time.Second) // a few chart samples
	shoot(t, ctx, dir, "credentials")
	plog.clean(t, "credentials")

	// Batches: the progress moves by itself.
	within(t, ctx, 20*time.Second, "batches page",
		chromedp.Navigate(k.srv.URL+PagePrefix+"batches"),
		chromedp.WaitVisible(chromedp.CSS("#batches .job .fill")),
	)
	before, after = changes(t, ctx, "the batch progress", `document.querySelector('#batches .job .stats').textContent`)
	t.Logf("batch: %q -> %q", before, after)
	shoot(t, ctx, dir, "batches")
	plog.clean(t, "batches")

	// Sessions: both wait for approval.
	within(t, ctx, 20*time.Second, "sessions page",
		chromedp.Navigate(k.srv.URL+PagePrefix+"sessions"),
		chromedp.WaitVisible(chromedp.CSS("#sessions tbody tr")),
	)
	if got := evalJS[string](t, ctx, `document.querySelector('#sessions tbody').textContent`); !strings.Contains(got, "refund-7") || !strings.Contains(got, "waiting_approval") {
		t.Fatalf("sessions table: %q", got)
	}
	shoot(t, ctx, dir, "sessions")
	plog.clean(t, "sessions")

	// Approvals: approve refund-7 with a note.
	row := fmt.Sprintf(`tr[data-session="refund-7"][data-interrupt="%s"]`, in.ID)
	within(t, ctx, 20*time.Second, "approvals page",
		chromedp.Navigate(k.srv.URL+PagePrefix+"approvals"),
		chromedp.WaitVisible(chromedp.CSS(row+" button.approve")),
	)
	shoot(t, ctx, dir, "approvals")
	within(t, ctx, 20*time.Second, "approve",
		chromedp.SendKeys(chromedp.CSS(row+" input.note"), `ok <img src=x onerror="window.__pwned=5">`),
		chromedp.Click(chromedp.CSS(row+" button.approve")),
	)
	waitText(t, ctx, row+" .result", "approved")
	plog.clean(t, "approvals")
	if k.refunds("refund-7") > 1 {
		t.Fatal("the refund ran twice")
	}
	// A second operator's resolution, through the API: already resolved.
	if r := k.do(req{method: "POST", path: APIPrefix + "sessions/refund-7/reject", body: ResolveRequest{Interrupt: in.ID}, bearer: testToken}); r.status != http.StatusConflict {
		t.Fatalf("second resolution: %d %s", r.status, r.body)
	}

	// The session finishes; its page shows the hostile result as text.
	within(t, ctx, 20*time.Second, "session page",
		chromedp.Navigate(k.srv.URL+PagePrefix+"sessions/refund-7"),
		chromedp.WaitVisible(chromedp.CSS("#s-state")),
	)
	waitText(t, ctx, "#s-last", "completed")
	waitText(t, ctx, "#s-state", "idle")
	if got := evalJS[string](t, ctx, `document.querySelector('#tools tbody').textContent`); !strings.Contains(got, hostile) {
		t.Fatalf("tool result not shown as text: %q", got)
	}
	if got := evalJS[int](t, ctx, `document.querySelectorAll('#tools script, #timeline script, #tools img, #timeline img').length`); got != 0 {
		t.Fatalf("%d elements made from content", got)
	}
	if k.refunds("refund-7") != 1 {
		t.Fatalf("refund ran %d times", k.refunds("refund-7"))
	}
	waitText(t, ctx, "#events", "turn_finished")
	shoot(t, ctx, dir, "session")
	plog.clean(t, "sessions/refund-7")
	// The probe on every page that shows content.
	for _, p := range []string{"sessions/refund-7", "approvals", "sessions"} {
		within(t, ctx, 20*time.Second, p, chromedp.Navigate(k.srv.URL+PagePrefix+p), chromedp.WaitVisible(chromedp.CSS("main")), chromedp.Sleep(600*time.Millisecond))
		if pwned := evalJS[bool](t, ctx, `typeof window.__pwned !== "undefined"`); pwned {
			t.Fatalf("page %s: the hostile content ran", p)
		}
		plog.clean(t, p)
	}
	within(t, ctx, 20*time.Second, "cluster page", chromedp.Navigate(k.srv.URL+PagePrefix+"cluster"), chromedp.WaitVisible(chromedp.CSS("main")))
	if got := evalJS[string](t, ctx, `document.querySelector("main").textContent`); !strings.Contains(got, "does not run on a cluster member") {
		t.Fatalf("cluster page outside a cluster: %q", got)
	}
	plog.clean(t, "cluster")
	t.Logf("screenshots in %s", dir)
}

// waitText waits until the element's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = evalJS[string](t, ctx, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel))
		if strings.Contains(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %q, want %q", sel, got, want)
}
