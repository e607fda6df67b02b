package console

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// routedRuntime is a runtime with a plain alias and two routed ones over
// two llmtest upstreams: east answers (a tenth of its input read from the
// prompt cache), west fails every call with a 500 until healthy is
// closed. "balanced" weighs east 2 to west 1 and ejects west once it has
// failed 4 of its recent calls; "quickest" is fastest over both.
func routedRuntime(t *testing.T) *runtime.Runtime {
	t.Helper()
	east, west := llmtest.NewServer(), llmtest.NewServer()
	t.Cleanup(east.Close)
	t.Cleanup(west.Close)
	east.SetResponder(func(llmtest.Recorded) llmtest.Step {
		return llmtest.Respond(llmtest.Reply{Text: "ok", Usage: &llm.Usage{PromptTokens: 90, CacheReadTokens: 10, CompletionTokens: 2}})
	})
	west.SetResponder(func(llmtest.Recorded) llmtest.Step { return llmtest.Status(500, 0) })
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "east", Format: providers.FormatOpenAI, BaseURL: east.OpenAIBaseURL(), APIKey: "sk-east-for-tests"}),
		runtime.WithProvider(providers.Config{ID: "west", Format: providers.FormatOpenAI, BaseURL: west.OpenAIBaseURL(), APIKey: "sk-west-for-tests"}),
		runtime.WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1})),
		runtime.WithAlias("plain", "east/m", "west/m"),
		runtime.WithRoutedAlias("balanced", runtime.Route{Strategy: runtime.StrategyWeighted, Targets: []runtime.Target{{Model: "east/m", Weight: 2}, {Model: "west/m", Weight: 1}},
			Eject: runtime.Ejection{MinCalls: 4, Duration: 10 * time.Minute}}),
		runtime.WithRoutedAlias("quickest", runtime.Route{Strategy: runtime.StrategyFastest, Targets: []runtime.Target{{Model: "east/m"}, {Model: "west/m"}}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// callRoutes makes n calls to each routed alias; west's failures fall
// back to east, so every call succeeds.
func callRoutes(t *testing.T, rt *runtime.Runtime, n int) {
	t.Helper()
	for range n {
		for _, a := range []string{"balanced", "quickest"} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := rt.Chat(ctx, &llm.ChatRequest{Model: a, Messages: []llm.Message{llm.UserText("hi")}})
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
		}
	}
}

// TestCredentialsRoutes: GET /api/console/credentials names each routed
// alias's strategy, and each target's share of the calls, what it served
// and failed, and its ejection: west, failing every call, is ejected from
// balanced and serves none of it.
func TestCredentialsRoutes(t *testing.T) {
	rt := routedRuntime(t)
	callRoutes(t, rt, 30)
	h, err := New(Options{Runtime: rt, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	v := h.credentials()
	strategies := map[string]string{}
	for _, a := range v.Aliases {
		strategies[a.Name] = a.Strategy
	}
	if strategies["plain"] != "" || strategies["balanced"] != "weighted" || strategies["quickest"] != "fastest" {
		t.Fatalf("aliases' strategies %v", strategies)
	}
	if len(v.Routes) != 2 || v.Routes[0].Alias != "balanced" || len(v.Routes[0].Targets) != 2 {
		t.Fatalf("routes %+v", v.Routes)
	}
	east, west := v.Routes[0].Targets[0], v.Routes[0].Targets[1]
	if west.EjectedUntil == nil || west.Ejections != 1 || west.Served != 0 || west.Failed < 4 || west.ErrorRate != 1 {
		t.Fatalf("west %+v, want ejected after its failures", west)
	}
	if east.EjectedUntil != nil || east.Served != 30 || east.Share <= west.Share || east.Share+west.Share < 0.999 || east.CachedTokens*10 != east.InputTokens {
		t.Fatalf("east %+v (west %+v)", east, west)
	}
}

// TestBrowserAliases drives the Credentials page's alias tables in
// chromium: each alias's strategy, and per routed target its share of
// the calls and its health, west ejected; the shares move by themselves
// as calls go on. The page is captured (docs/console/aliases.png).
func TestBrowserAliases(t *testing.T) {
	rt := routedRuntime(t)
	callRoutes(t, rt, 30)
	h, err := New(Options{Runtime: rt, Loopback: true, Tick: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { // after the browser's cleanup, which ends its live stream
		srv.CloseClientConnections()
		srv.Close()
	})
	ctx := browser(t)
	dir := artifacts(t)
	plog := watchConsole(t, ctx)

	within(t, ctx, 20*time.Second, "credentials page",
		chromedp.Navigate(srv.URL+PagePrefix+"credentials"),
		chromedp.WaitVisible(chromedp.CSS(`#routes tbody tr[data-alias="balanced"]`)),
	)
	if got := evalJS[string](t, ctx, `document.querySelector('#aliases tr[data-alias="balanced"]').textContent`); !strings.Contains(got, "weighted") {
		t.Fatalf("balanced in the aliases table: %q", got)
	}
	if got := evalJS[string](t, ctx, `document.querySelector('#aliases tr[data-alias="plain"]').textContent`); !strings.Contains(got, "fallback list") || !strings.Contains(got, "east/m (step 0)") {
		t.Fatalf("plain in the aliases table: %q", got)
	}
	health := evalJS[string](t, ctx, `document.querySelector('#routes tr[data-alias="balanced"][data-target="west/m"] td.health').textContent`)
	if !strings.HasPrefix(health, "ejected until ") || !strings.Contains(health, "(ejections: 1)") {
		t.Fatalf("west's health: %q", health)
	}
	if got := evalJS[string](t, ctx, `document.querySelector('#routes tr[data-alias="balanced"][data-target="east/m"] td.health').textContent`); got != "healthy" {
		t.Fatalf("east's health: %q", got)
	}
	// While calls go on, the shares change without a reload: west, ejected,
	// takes none of them.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = rt.Chat(ctx, &llm.ChatRequest{Model: "balanced", Messages: []llm.Message{llm.UserText("hi")}})
			cancel()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	before, after := changes(t, ctx, "west's share", `document.querySelector('#routes tr[data-alias="balanced"][data-target="west/m"] td.share').textContent`)
	close(stop)
	<-done
	t.Logf("west's share of balanced: %s -> %s", before, after)
	shoot(t, ctx, dir, "aliases")
	plog.clean(t, "credentials, aliases")
}
