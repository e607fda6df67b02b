// Package faultproxy is a TCP proxy on loopback that a test puts between
// a process and what it talks to (another cluster member, PostgreSQL), so
// that it can fail the link the ways machines fail (toxiproxy's faults,
// as a library, with nothing to install):
//
//   - Partition: the link goes silent both ways. Bytes already in flight
//     are held, new connections are accepted and then hear nothing, as
//     when packets are dropped: the peer waits for its own timeouts.
//   - Reset: every open connection is reset (RST) and new ones are
//     refused until Heal, as when a host goes away.
//   - Latency: every chunk of bytes is held for a delay plus up to a
//     jitter, in each direction.
//   - Stall: like Partition for the connections open now only; new ones
//     pass.
//   - Heal: back to passing bytes; held bytes then flow, in order.
//
// A proxy counts what it did (Stats), so a test can print what it
// injected. It never leaves a goroutine behind after Close.
package faultproxy

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Mode is the link's state.
type Mode int

const (
	Pass Mode = iota
	Partitioned
	Refusing
)

// Stats counts what the proxy did.
type Stats struct {
	Accepted, Refused, Resets, Partitions, Heals int
	BytesUp, BytesDown                           int64
}

// Proxy forwards connections on Addr to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond // broadcast on every change of mode or latency
	mode    Mode
	stalled map[*link]bool // stalled open connections (Stall)
	latency time.Duration
	jitter  time.Duration
	links   map[*link]bool
	stats   Stats
	closed  bool
	wg      sync.WaitGroup
}

type link struct {
	client, server net.Conn
}

// Start listens on 127.0.0.1 (a free port) and forwards to target.
func Start(target string) (*Proxy, error) {
	return StartAt("127.0.0.1:0", target)
}

// StartAt listens on addr and forwards to target: a test that needs the
// proxy at a given port (a cluster member's membership port is its actor
// port plus one) picks it.
func StartAt(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]bool{}, stalled: map[*link]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition makes the link silent both ways, for open and new connections.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.mode = Partitioned
	p.stats.Partitions++
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Stall holds the bytes of the connections open now; new ones pass.
func (p *Proxy) Stall() {
	p.mu.Lock()
	for l := range p.links {
		p.stalled[l] = true
	}
	p.stats.Partitions++
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Reset resets every open connection and refuses new ones until Heal.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.mode = Refusing
	ls := p.takeLinks()
	p.stats.Resets += len(ls)
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, l := range ls {
		l.reset()
	}
}

// ResetConnections resets the connections open now; new ones pass.
func (p *Proxy) ResetConnections() {
	p.mu.Lock()
	ls := p.takeLinks()
	p.stats.Resets += len(ls)
	p.mu.Unlock()
	for _, l := range ls {
		l.reset()
	}
}

func (p *Proxy) takeLinks() []*link {
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
		delete(p.links, l)
		delete(p.stalled, l)
	}
	return ls
}

// SetLatency holds every chunk of bytes for d plus up to jitter.
func (p *Proxy) SetLatency(d, jitter time.Duration) {
	p.mu.Lock()
	p.latency, p.jitter = d, jitter
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Heal passes bytes again: held bytes flow, in order, and the latency is
// gone.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mode = Pass
	p.latency, p.jitter = 0, 0
	clear(p.stalled)
	p.stats.Heals++
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ls := p.takeLinks()
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range ls {
		l.client.Close()
		l.server.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.mode == Refusing || p.closed {
			p.stats.Refused++
			p.mu.Unlock()
			resetConn(c)
			continue
		}
		p.stats.Accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		resetConn(c)
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.links[l] = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, s, c, &p.stats.BytesUp) }()
	go func() { defer wg.Done(); p.pipe(l, c, s, &p.stats.BytesDown) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	delete(p.stalled, l)
	p.mu.Unlock()
}

// pipe copies src to dst chunk by chunk, each chunk waiting while the
// link is partitioned or stalled, and for the latency.
func (p *Proxy) pipe(l *link, dst, src net.Conn, count *int64) {
	defer func() {
		// One side ended: end the other (a half-closed link is not a
		// fault this proxy models).
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			p.mu.Lock()
			*count += int64(n)
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// hold waits while l may not pass bytes and for the latency; false when
// the link is gone.
func (p *Proxy) hold(l *link) bool {
	p.mu.Lock()
	for !p.closed && p.links[l] && (p.mode == Partitioned || p.stalled[l]) {
		p.cond.Wait()
	}
	alive := !p.closed && p.links[l]
	d := p.latency
	if p.jitter > 0 {
		d += rand.N(p.jitter)
	}
	p.mu.Unlock()
	if !alive {
		return false
	}
	if d > 0 {
		time.Sleep(d)
	}
	return true
}

func (l *link) reset() {
	resetConn(l.client)
	resetConn(l.server)
}

// resetConn closes c with an RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
