package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
)

// freeAddrs returns k loopback addresses for test members (LocalAddrs).
func freeAddrs(t testing.TB, k int) []string {
	t.Helper()
	addrs, err := LocalAddrs(k)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// openaiAt registers srv as the provider "fake" with key.
func openaiAt(srv *llmtest.Server, key string) runtime.Option {
	return runtime.WithProvider(providers.Config{ID: "fake", Format: providers.FormatOpenAI, BaseURL: srv.OpenAIBaseURL(), APIKey: providers.Secret(key)})
}

// joinAll starts members on addrs (each knowing all) and waits until each
// sees all of them.
func joinAll(t testing.TB, name string, addrs []string, cfg func(i int, c *Config)) []*Node {
	t.Helper()
	nodes := make([]*Node, len(addrs))
	for i, a := range addrs {
		c := Config{Name: name, Bind: a, Peers: addrs, RefreshInterval: 200 * time.Millisecond}
		if cfg != nil {
			cfg(i, &c)
		}
		n, err := Join(context.Background(), c)
		if err != nil {
			t.Fatalf("join %s: %v", a, err)
		}
		nodes[i] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range nodes {
		if n.cfg.Client {
			continue
		}
		if err := n.WaitMembers(ctx, len(addrs)); err != nil {
			t.Fatal(fmt.Errorf("%s: %w", n.Address(), err))
		}
	}
	return nodes
}

func closeAll(t testing.TB, nodes []*Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.Close(ctx); err != nil {
			t.Errorf("close %s: %v", n.Address(), err)
		}
	}
}

// recorder is a loopback proxy in front of a fake provider that notes the
// time and status of every answer.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	marks []mark
}

type mark struct {
	at     time.Time
	status int
}

func newRecorder(target string) *recorder {
	u, _ := url.Parse(target)
	r := &recorder{}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		r.mu.Lock()
		r.marks = append(r.marks, mark{at: time.Now(), status: resp.StatusCode})
		r.mu.Unlock()
		return nil
	}
	r.Server = httptest.NewServer(p)
	return r
}

// limited returns the 429s and how long after the first answer the last
// one came.
func (r *recorder) limited() (n int, last time.Duration, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.marks) == 0 {
		return 0, 0, 0
	}
	first := r.marks[0].at
	for _, m := range r.marks {
		if m.status == http.StatusTooManyRequests {
			n++
			last = m.at.Sub(first)
		}
	}
	return n, last, len(r.marks)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
func errorsIs(err, target error) bool     { return errors.Is(err, target) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var errUnknownSession = session.ErrUnknownSession
