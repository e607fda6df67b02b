package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// memTransport answers every request with the same SSE body from memory.
type memTransport struct{ body []byte }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(m.body)), Request: r}, nil
}

func memBody(n int) []byte {
	var b strings.Builder
	for i := range n {
		b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok` + strconv.Itoa(i%10) + ` "},"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	return []byte(b.String())
}

// benchPair is two members in this process: a caller and a worker.
func benchPair(b *testing.B, name string, setup func(i int, c *Config)) (caller, worker *Node) {
	b.Helper()
	addrs := freeAddrs(b, 2)
	nodes := joinAll(b, name, addrs, setup)
	b.Cleanup(func() { closeAll(b, nodes) })
	return nodes[0], nodes[1]
}

// BenchmarkRemoteStream measures what a remote stream adds per delta: the
// same 2,000-delta answer, served from memory (no provider socket), streamed
// by the worker's runtime and read on the worker (local), and streamed on
// the worker and read on the caller's node through the remote connection
// (remote). Both report ns/delta; the difference is the remote hop: proto
// encoding, batching, gRPC on loopback, credit.
func BenchmarkRemoteStream(b *testing.B) {
	const deltas = 2000
	hc := &http.Client{Transport: memTransport{memBody(deltas)}}
	caller, worker := benchPair(b, "bench-stream", func(i int, c *Config) {
		c.Runtime = append(c.Runtime,
			runtime.WithProvider(providers.Config{ID: "fake", Format: providers.FormatOpenAI, BaseURL: "http://mem.invalid/v1", APIKey: "sk-bench"}),
			runtime.WithClientOptions(providers.WithHTTPClient(hc)))
	})
	req := &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}}
	count := func(s *llm.Stream) int {
		n := 0
		for ev, err := range s.All() {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == llm.EventText {
				n++
			}
		}
		return n
	}
	b.Run("local", func(b *testing.B) {
		total := 0
		for b.Loop() {
			s, err := worker.Runtime().Stream(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			total += count(s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/delta")
	})
	b.Run("remote", func(b *testing.B) {
		target := actor.NewPID(worker.Address(), workerName)
		total := 0
		for b.Loop() {
			s, w, ctx := llm.NewStream(context.Background(), 64)
			go func() {
				res, _, err := caller.remoteOnce(ctx, target, mustJSON(b, req), w)
				w.Finish(res, err)
			}()
			total += count(s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/delta")
	})
}

// BenchmarkRemoteSessionStep measures a session turn (one model step, no
// tool) driven on the node that hosts the session (local: its Manager) and
// from a client node (remote: Send and Wait cross the connection), and a
// Snapshot round trip each way.
func BenchmarkRemoteSessionStep(b *testing.B) {
	dsn := pgDSN(b)
	srv := llmtest.NewServer(llmtest.WithDefault(llmtest.Reply{Text: "ok"}))
	b.Cleanup(srv.Close)
	l := &ledger{path: filepath.Join(b.TempDir(), "ledger")}
	addrs := freeAddrs(b, 2)
	member := joinAll(b, "bench-session", addrs[:1], func(i int, c *Config) {
		c.Runtime = append(c.Runtime, openaiAt(srv, "sk-bench"))
		c.Sessions = sessionOptions(b, dsn, l, 0)
		c.Sessions.Tools = nil
	})[0]
	client, err := Join(context.Background(), Config{Name: "bench-session", Bind: addrs[1], Peers: addrs[:1], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closeAll(b, []*Node{client, member}) })
	ctx := context.Background()
	if err := client.WaitMembers(ctx, 1); err != nil {
		b.Fatal(err)
	}
	m := member.sessions.m
	ss := client.Sessions()
	// Each session takes 20 turns, then the next begins, so that history
	// stays short (its activation, with the lease, is in the numbers: one
	// turn in 20).
	turns := func(b *testing.B, prefix string, send func(string) error, wait func(string) error) {
		i := 0
		for b.Loop() {
			id := fmt.Sprintf("%s-%d", prefix, i/20)
			if i%20 == 0 { // activate it on the member: it takes the lease
				if _, err := ss.Snapshot(ctx, id); err != nil && !errorsIs(err, errUnknownSession) {
					b.Fatal(err)
				}
			}
			i++
			if err := send(id); err != nil {
				b.Fatal(err)
			}
			if err := wait(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("turn/local", func(b *testing.B) {
		turns(b, "local"+newToken(), func(id string) error { return m.Send(ctx, id, llm.UserText("hi")) },
			func(id string) error { _, err := m.Wait(ctx, id); return err })
	})
	b.Run("turn/remote", func(b *testing.B) {
		turns(b, "remote"+newToken(), func(id string) error { return ss.Send(ctx, id, llm.UserText("hi")) },
			func(id string) error { _, err := ss.Wait(ctx, id); return err })
	})
	if err := ss.Send(ctx, "snap", llm.UserText("hi")); err != nil {
		b.Fatal(err)
	}
	if _, err := ss.Wait(ctx, "snap"); err != nil {
		b.Fatal(err)
	}
	b.Run("snapshot/local", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Snapshot(ctx, "snap"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot/remote", func(b *testing.B) {
		for b.Loop() {
			if _, err := ss.Snapshot(ctx, "snap"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
