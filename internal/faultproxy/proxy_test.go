package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echo is a TCP echo server (line by line) on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip writes a line and reads it back within d.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	return s, err
}

func TestPassesBytes(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if s, err := c.roundTrip("hello", 5*time.Second); err != nil || s != "hello\n" {
		t.Fatalf("%q %v", s, err)
	}
	// The count follows the write the client already read from: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for st := p.Stats(); st.BytesDown != 6; st = p.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	if st := p.Stats(); st.Accepted != 1 || st.BytesUp != 6 || st.BytesDown != 6 {
		t.Fatalf("stats %+v", st)
	}
}

// A partitioned link is silent (the peer times out, nothing is reset) and
// what was held arrives, in order, once healed; new connections are
// silent too.
func TestPartitionHoldsThenHeals(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	_, err := c.roundTrip("during", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a partitioned link answered: %v", err)
	}
	c2 := dial(t, p)
	if _, err := c2.roundTrip("new", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection made during the partition answered: %v", err)
	}
	p.Heal()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, err := c.r.ReadString('\n'); err != nil || s != "during\n" {
		t.Fatalf("after heal: %q %v", s, err)
	}
	_ = c2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, err := c2.r.ReadString('\n'); err != nil || s != "new\n" {
		t.Fatalf("the new connection after heal: %q %v", s, err)
	}
	if st := p.Stats(); st.Partitions != 1 || st.Heals != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Reset ends open connections with an error and refuses new ones until
// Heal.
func TestResetRefusesUntilHeal(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if _, err := c.roundTrip("y", 5*time.Second); err == nil {
		t.Fatal("a reset connection still answers")
	}
	// The listener accepts, then resets: the client sees it at connect or
	// at its first read.
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		cl := &client{c: c2, r: bufio.NewReader(c2)}
		_, rerr := cl.roundTrip("z", 5*time.Second)
		c2.Close()
		if rerr == nil {
			t.Fatal("a connection made while refusing answered")
		}
	}
	p.Heal()
	// A connection the kernel queued while refusing may still be reset as
	// the refusal drains: a client reconnects, as pgx and gRPC do.
	var s string
	var err error
	for i := 0; i < 20; i++ {
		var c3 net.Conn
		if c3, err = net.Dial("tcp", p.Addr()); err == nil {
			cl := &client{c: c3, r: bufio.NewReader(c3)}
			s, err = cl.roundTrip("ok", 5*time.Second)
			c3.Close()
			if err == nil {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || s != "ok\n" {
		t.Fatalf("after heal: %q %v", s, err)
	}
	if st := p.Stats(); st.Resets < 1 || st.Refused < 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Stall holds the connections open now; a new one passes.
func TestStallHoldsOpenConnections(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, err := c.roundTrip("a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	if _, err := c.roundTrip("b", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled connection answered: %v", err)
	}
	c2 := dial(t, p)
	if s, err := c2.roundTrip("fresh", 5*time.Second); err != nil || s != "fresh\n" {
		t.Fatalf("a new connection during a stall: %q %v", s, err)
	}
	p.Heal()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, err := c.r.ReadString('\n'); err != nil || s != "b\n" {
		t.Fatalf("after heal: %q %v", s, err)
	}
}

// Latency holds every chunk, each way: a round trip takes at least twice
// the delay (a lower bound the proxy guarantees, not a speed).
func TestLatencyDelaysEachWay(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	p.SetLatency(100*time.Millisecond, 0)
	t0 := time.Now()
	if _, err := c.roundTrip("slow", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("a round trip took %v with 100ms each way", d)
	}
}

// Close ends every connection and goroutine (goleak checks the rest).
func TestCloseEndsConnections(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	p.Partition()
	_, _ = c.c.Write([]byte("held\n"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a closed proxy's connection: %v", err)
	}
}

// StartAt listens where it is told (a cluster member's membership port is
// its actor port plus one), and refuses an address already taken.
func TestStartAtListensWhereAsked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	at := ln.Addr().String()
	ln.Close()
	p, err := StartAt(at, echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Addr() != at {
		t.Fatalf("listens on %s, want %s", p.Addr(), at)
	}
	if s, err := dial(t, p).roundTrip("hello", 5*time.Second); err != nil || s != "hello\n" {
		t.Fatalf("%q %v", s, err)
	}
	if q, err := StartAt(at, "127.0.0.1:1"); err == nil {
		q.Close()
		t.Fatalf("a second proxy took %s", at)
	}
}
