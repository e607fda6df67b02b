package cluster

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestCloseNeverPanics starts and stops small clusters over and over, the
// members of each closing at the same moment (each one's connections to
// the others break while it stops its own): the way Proto.Actor's remote
// panicked at shutdown, in its own goroutine, killing the process (its
// endpoint manager's stop sets its connection map to nil while a broken
// connection's receive goroutine still publishes its termination). The
// node's leave never stops the endpoint manager (leaveCluster), so no
// round can panic: the test binary survives them all, and goleak finds no
// connection left. CHORUS_CLOSE_ROUNDS sets the rounds (default 24; 200
// for the proof), run four clusters at a time.
func TestCloseNeverPanics(t *testing.T) {
	rounds := 24
	if s := os.Getenv("CHORUS_CLOSE_ROUNDS"); s != "" {
		r, err := strconv.Atoi(s)
		if err != nil || r <= 0 {
			t.Fatalf("CHORUS_CLOSE_ROUNDS=%q is not a positive number", s)
		}
		rounds = r
	}
	const parallel = 4
	start := time.Now()
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for r := range rounds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := closeRound(t, r); err != nil {
				t.Errorf("round %d: %v", r, err)
				return
			}
			mu.Lock()
			done++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d of %d rounds of two members and a client started, talked and closed at once, in %v, with no panic", done, rounds, time.Since(start).Round(time.Second))
}

// closeRound joins two members and a client, waits until each sees the
// others, and closes all three at once.
func closeRound(t *testing.T, r int) error {
	addrs, err := LocalAddrs(3)
	if err != nil {
		return err
	}
	name := "close-" + strconv.Itoa(r)
	var nodes []*Node
	for i, a := range addrs {
		n, err := Join(context.Background(), Config{Name: name, Bind: a, Peers: addrs[:2], Client: i == 2, RefreshInterval: 100 * time.Millisecond})
		if err != nil {
			for _, n := range nodes {
				_ = n.Close(context.Background())
			}
			return err
		}
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var werr error
	for _, n := range nodes {
		if err := n.WaitMembers(ctx, 2); err != nil && werr == nil {
			werr = err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Close(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && werr == nil {
			werr = err
		}
	}
	return werr
}
