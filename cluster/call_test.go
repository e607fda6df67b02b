package cluster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// Embeddings run on the members, from a client too, and their errors
// cross typed.
func TestRemoteEmbed(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	addrs := freeAddrs(t, 3)
	members := joinAll(t, "embed", addrs[:2], func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	client, err := Join(context.Background(), Config{Name: "embed", Bind: addrs[2], Peers: addrs[:2], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, append(members, client))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.WaitMembers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		res, err := client.Embed(ctx, &llm.EmbedRequest{Model: "fake/e", Inputs: []string{"a", "b", "c"}})
		if err != nil {
			t.Fatalf("embed %d: %v", i, err)
		}
		if len(res.Vectors) != 3 || len(res.Vectors[0]) == 0 {
			t.Fatalf("embed %d: %d vectors", i, len(res.Vectors))
		}
		want := llmtest.EmbeddingFor("b", len(res.Vectors[1]))
		if res.Vectors[1][0] != want[0] {
			t.Fatalf("embed %d: vector of \"b\" is not the server's", i)
		}
	}
	_, err = client.Embed(ctx, &llm.EmbedRequest{Model: "nowhere/e", Inputs: []string{"a"}})
	var ce *llm.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("embed on an unknown provider: %v (%T), want a *llm.ConfigError from the member", err, err)
	}
	if _, err := client.Embed(ctx, nil); err == nil {
		t.Fatal("a nil request was sent")
	}
}

// Cancelling a remote embed cancels it on its member: the member's
// provider request ends at once (the provider sees its request's context
// done), not when the provider answers.
func TestRemoteEmbedCancelReachesTheMember(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: time.Minute}))
	// In front of the fake provider, a proxy that reports when an
	// embeddings request starts and when its context ends.
	started, ended := make(chan struct{}, 1), make(chan struct{}, 1)
	u, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			notify(started)
			go func() { <-r.Context().Done(); notify(ended) }()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	addrs := freeAddrs(t, 2)
	members := joinAll(t, "embed-cancel", addrs[:1], func(i int, c *Config) {
		c.Runtime = append(c.Runtime, runtime.WithProvider(providers.Config{ID: "fake", Format: providers.FormatOpenAI, BaseURL: front.URL + "/v1", APIKey: "sk-test"}))
	})
	client, err := Join(context.Background(), Config{Name: "embed-cancel", Bind: addrs[1], Peers: addrs[:1], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, append(members, client))
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := client.WaitMembers(wctx, 1); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := client.Embed(ctx, &llm.EmbedRequest{Model: "fake/e", Inputs: []string{"a"}})
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the member's provider request never started")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled embed: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(3 * time.Second):
		t.Fatal("the member's provider request still runs after the caller cancelled")
	}
}

// notify notes an event on ch without waiting.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Calls through the cluster keep succeeding while a member closes: a
// member's runtime closes before it leaves the cluster, and for those
// seconds it still gets calls, which it refuses as closed before running
// them; the caller runs such a call again on another member instead of
// failing it with runtime.ErrClosed (what TestPartitionSoak found, a
// member restarted mid-batch).
func TestCallsSurviveAMemberClosing(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	addrs := freeAddrs(t, 3)
	nodes := joinAll(t, "member-closing", addrs[:2], func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-member-closing"), runtime.WithTimeout(30*time.Second))
	})
	caller, err := Join(context.Background(), Config{Name: "member-closing", Bind: addrs[2], Peers: addrs[:2], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		closeAll(t, nodes)
		t.Fatal(err)
	}
	closing := nodes[0]
	defer closeAll(t, []*Node{caller, nodes[1]})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := caller.WaitMembers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		closed <- closing.Close(ctx)
	}()
	calls, failed := 0, 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	stop := time.Now().Add(5 * time.Second) // past the member's leave (its runtime closes, then 2 s)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				_, err := caller.Chat(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
				mu.Lock()
				calls++
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatalf("close the member: %v", err)
	}
	t.Logf("%d calls through the cluster while a member closed, %d failed", calls, failed)
	if failed > 0 {
		t.Fatalf("%d of %d calls failed while a member closed, the first: %v", failed, calls, firstErr)
	}
}
