package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// Two keys of one organisation, not declared to share its limit, on two
// nodes: each key's budget owner is told how many keys serve the endpoint,
// so once the reports show the keys drawing on one limit each owner paces
// at its share of it. Without that, each owner read the whole of what
// remained as its own and the two burst into every window.
func TestUndeclaredSharedKeysAcrossNodes(t *testing.T) {
	const (
		limit  = 10
		window = 400 * time.Millisecond
		total  = 60
	)
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: limit, Window: window, Model: llmtest.FixedWindow,
		Orgs: map[string]string{"ok-a": "acme", "ok-b": "acme"}}))
	defer srv.Close()
	keys := []runtime.Option{
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: providers.Secret("ok-a")}),
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: providers.Secret("ok-b")}),
	}
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "orgkeys", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, keys...) })
	defer closeAll(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	chatAcross(ctx, t, nodes, "openai/m", total)
	first := srv.FirstRequestAt()
	all, late := srv.RateLimitedAt(), 0
	for _, at := range all {
		// The owners learn the limit, and that the keys share it, in the
		// first window; the second window's turn is where an owner that
		// reads the whole remainder as its own bursts.
		if at.Sub(first) > window {
			late++
		}
	}
	t.Logf("429s %d, after the first window %d", len(all), late)
	if late > 0 {
		t.Errorf("%d 429s after the first window from keys sharing one limit", late)
	}
}
