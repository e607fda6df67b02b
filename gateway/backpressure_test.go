package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// smallBuffers makes the kernel's socket buffers of a connection small, so
// that what a stalled reader leaves unread backs up into the process at
// once instead of into megabytes of loopback buffers.
func smallBuffers(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(8 << 10)
		_ = tc.SetWriteBuffer(8 << 10)
		smallConns.mu.Lock()
		smallConns.c = append(smallConns.c, tc)
		smallConns.mu.Unlock()
	}
}

// smallConns are the connections smallBuffers shrank; growBuffers gives
// them ordinary buffers again once the measurement is done (8 KiB
// loopback windows make the rest of a 20,000-delta stream crawl).
var smallConns struct {
	mu sync.Mutex
	c  []*net.TCPConn
}

func growBuffers() {
	smallConns.mu.Lock()
	defer smallConns.mu.Unlock()
	for _, c := range smallConns.c {
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
	}
	smallConns.c = nil
}

// deltaUpstream is an OpenAI-format provider whose answer to a prompt
// "N" is N content deltas "d<i> "; written counts the deltas it has
// handed to its connection (a write blocks when nobody reads).
type deltaUpstream struct {
	srv     *httptest.Server
	written atomic.Int64
}

func newDeltaUpstream(t *testing.T) *deltaUpstream {
	u := &deltaUpstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		n := 0
		fmt.Sscan(req.Messages[len(req.Messages)-1].Content, &n)
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 512)
		for i := range n {
			fmt.Fprintf(bw, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"d%d "},"finish_reason":null}]}`+"\n\n", i)
			if bw.Flush() != nil {
				return
			}
			if n > 100 {
				u.written.Add(1)
			}
		}
		fmt.Fprint(bw, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\ndata: [DONE]\n\n")
		_ = bw.Flush()
	}))
	u.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { smallBuffers(c); return ctx }
	u.srv.Start()
	t.Cleanup(func() { u.srv.CloseClientConnections(); u.srv.Close() })
	return u
}

func smallBufferTransport() *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			smallBuffers(c)
		}
		return c, err
	}}
}

// TestSlowClientSlowsOnlyItsOwnStream: a client that reads nothing while
// its upstream has 20,000 deltas to send holds back that upstream (the
// gateway buffers a bounded number of them: the runtime's stream buffer
// and one flush), another client's stream through the same gateway and
// provider completes meanwhile, and the slow client, once it reads, gets
// every delta in order.
func TestSlowClientSlowsOnlyItsOwnStream(t *testing.T) {
	const total = 20_000
	up := newDeltaUpstream(t)
	upTr := smallBufferTransport()
	defer upTr.CloseIdleConnections()
	_, h, closeHandler := newHandler(t, gateway.Options{},
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.srv.URL + "/v1", APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithHTTPClient(&http.Client{Transport: upTr}), providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1}),
			providers.WithTimeout(3*time.Minute), providers.WithIdleTimeout(2*time.Minute)),
	)
	defer closeHandler()
	gw := httptest.NewUnstartedServer(h)
	gw.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { smallBuffers(c); return ctx }
	gw.Start()
	defer func() { gw.CloseClientConnections(); gw.Close() }()
	clTr := smallBufferTransport()
	defer clTr.CloseIdleConnections()
	client := &http.Client{Transport: clTr}
	stream := func(n int) *http.Response {
		resp, err := client.Post(gw.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":"openai/m","stream":true,"messages":[{"role":"user","content":"%d"}]}`, n)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", err, resp)
		}
		return resp
	}

	slow := stream(total) // headers only: the body is not read
	defer slow.Body.Close()
	// Wait until the upstream stops getting ahead: its writes block.
	last, same := int64(-1), 0
	for deadline := time.Now().Add(20 * time.Second); same < 10 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := up.written.Load(); n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	held := up.written.Load()
	t.Logf("a client reading nothing held its upstream at %d of %d deltas", held, total)
	if held >= total/4 {
		t.Fatalf("the upstream wrote %d of %d deltas to a client that read nothing: the gateway does not hold it back", held, total)
	}

	// Another client's stream is served meanwhile.
	fast := stream(50)
	b, err := io.ReadAll(fast.Body)
	fast.Body.Close()
	if err != nil || strings.Count(string(b), `"content":"d`) != 50 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("the other client's stream: %v\n%.300s", err, b)
	}
	if n := up.written.Load(); n > held+int64(total/100) {
		t.Errorf("the slow stream moved on (%d, then %d) while its client read nothing", held, n)
	}

	// The slow client reads now: every delta, in order, then [DONE].
	growBuffers()
	sc := bufio.NewScanner(slow.Body)
	next := 0
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			break
		}
		if i := strings.Index(line, `"content":"d`); i >= 0 {
			var k int
			fmt.Sscanf(line[i+len(`"content":"d`):], "%d", &k)
			if k != next {
				t.Fatalf("delta %d arrived where %d was due", k, next)
			}
			next++
		}
	}
	if !done || next != total {
		t.Fatalf("the slow client got %d of %d deltas (done %v, err %v)", next, total, done, sc.Err())
	}
}
