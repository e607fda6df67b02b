package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/internal/version"
)

// TestServeRootInBrowser: a real chromium opening chorus serve's address
// lands on the console (no token: the read-only login page, on loopback the
// console's pages), whose footer names the build, and nothing the page asked
// for failed: no 404 (the favicon the browser looks for at the root
// included), no script error. Skipped without chromium outside CI, as the
// console's browser tests are.
func TestServeRootInBrowser(t *testing.T) {
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing: the browser tests need it under CI (apt-get install -y chromium)")
		}
		t.Skip("chromium is missing: install Debian's chromium (apt-get install -y chromium) to run the browser tests")
	}
	base, stop := startServe(t, nil, "--addr", "127.0.0.1:0")
	defer stop()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc() // waits for the browser process to exit
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var (
		mu   sync.Mutex
		errs []string
	)
	cctx, stopConsole := context.WithCancel(ctx)
	done := make(chan struct{})
	msgs := chromedp.Console(cctx)
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	defer func() {
		stopConsole()
		<-done
	}()

	c, cancelNav := context.WithTimeout(ctx, 30*time.Second)
	defer cancelNav()
	if err := chromedp.Do(c, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("footer#version"))); err != nil {
		t.Fatalf("opening %s/: %v", base, err)
	}
	at, err := chromedp.Run(c, chromedp.Evaluate[string](`location.pathname`))
	if err != nil || !strings.HasPrefix(at, "/console/") {
		t.Fatalf("the browser at / landed on %q (%v), not the console", at, err)
	}
	footer, err := chromedp.Run(c, chromedp.Evaluate[string](`document.querySelector('footer#version').textContent`))
	if want := "Chorus " + version.Get().String(); err != nil || footer != want {
		t.Errorf("footer %q (%v), want %q", footer, err, want)
	}
	time.Sleep(500 * time.Millisecond) // the page's last requests are answered
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("the console logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
