package cluster

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// A lesson learned on one node is applied on the others (invariant 6:
// learn-once state is the endpoint's, shared by all its callers): its
// report carries it to the key's budget owner, whose grants carry it to
// every node. Ten requests, one at a time, alternating between two nodes,
// to an endpoint that refuses temperature: it refuses it once.
func TestLearnOnceAcrossNodes(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	var refused atomic.Int64
	srv.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		if bytes.Contains(r.Body, []byte(`"temperature"`)) {
			refused.Add(1)
			return llmtest.Fail(llmtest.Fault{Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."})
		}
		return llmtest.Text("ok")
	})
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "learn", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-learn")) })
	defer closeAll(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 10 {
		n := nodes[i%2]
		req := &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}, Temperature: llm.Ptr(0.3)}
		if _, err := n.Runtime().Chat(ctx, req); err != nil {
			t.Fatalf("request %d on %s: %v", i, n.Address(), err)
		}
		// The request's report travels on its own: wait until the owner
		// has counted it (and so merged its lessons).
		for deadline := time.Now().Add(10 * time.Second); ; {
			if st := nodes[0].Runtime().Stats(); len(st) == 1 && st[0].Requests == int64(i+1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the owner never counted request %d", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("the endpoint refused temperature %d times across the nodes, want once", n)
	}
}
