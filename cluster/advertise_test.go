package cluster

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/faultproxy"
)

// linkProxy is a fault proxy pair in front of a node: at (actor port) to
// the node's actor port and at+1 to its membership port, so that a peer
// given at as the node's address reaches both through the proxies.
type linkProxy struct{ actor, membership *faultproxy.Proxy }

func startLinkProxy(t testing.TB, at, target string) *linkProxy {
	t.Helper()
	plus1 := func(a string) string {
		h, p, err := splitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		return net.JoinHostPort(h, strconv.Itoa(p+1))
	}
	a, err := faultproxy.StartAt(at, target)
	if err != nil {
		t.Fatal(err)
	}
	m, err := faultproxy.StartAt(plus1(at), plus1(target))
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	lp := &linkProxy{actor: a, membership: m}
	t.Cleanup(lp.close)
	return lp
}

func (lp *linkProxy) partition() { lp.actor.Partition(); lp.membership.Partition() }
func (lp *linkProxy) heal()      { lp.actor.Heal(); lp.membership.Heal() }
func (lp *linkProxy) close()     { lp.actor.Close(); lp.membership.Close() }

// A member that advertises an address other than its Bind is known by it
// and reached only through it: its peers list it at the advertised
// address, their actor connections to it pass through what listens there
// (a fault proxy here), and when that goes silent they drop the member.
// (Proto.Actor then blocks the member's id for good: it comes back only
// as a new node, TestMemberPartitionedFromTheOthers.)
func TestAdvertisedAddress(t *testing.T) {
	addrs := freeAddrs(t, 3)
	bindA, advA, bindB := addrs[0], addrs[1], addrs[2]
	lp := startLinkProxy(t, advA, bindA)
	peers := []string{advA, bindB}
	nodes := joinAll(t, "advertise", []string{bindA, bindB}, func(i int, c *Config) {
		c.Peers = peers
		if i == 0 {
			c.Advertise = advA
		}
	})
	defer closeAll(t, nodes)
	a, b := nodes[0], nodes[1]
	if a.Address() != advA {
		t.Fatalf("the member's Address is %s, want its advertised %s", a.Address(), advA)
	}
	if got := b.Members(); !slices.Contains(got, advA) || slices.Contains(got, bindA) {
		t.Fatalf("the peer's members are %v: want the advertised %s, not the bind address %s", got, advA, bindA)
	}
	if got := a.Members(); len(got) != 2 {
		t.Fatalf("the advertising member sees %v, want itself once and its peer", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(t, ctx, "the peer's actor connection through the advertised address", func() bool { return lp.actor.Stats().Accepted > 0 })

	lp.partition()
	waitFor(t, ctx, "the peer to drop the member behind the silent link", func() bool { return !slices.Contains(b.Members(), advA) })
	lp.heal()
	st := lp.actor.Stats()
	t.Logf("through the advertised address: %d actor connections, %d/%d bytes; the membership proxy took %d health checks", st.Accepted, st.BytesUp, st.BytesDown, lp.membership.Stats().Accepted)
}

// A Config whose Advertise is not host:port is refused, naming the field.
func TestAdvertiseValidated(t *testing.T) {
	_, err := Join(context.Background(), Config{Name: "x", Bind: "127.0.0.1:1", Advertise: "nowhere"})
	if err == nil || !strings.Contains(err.Error(), "cluster.Advertise") {
		t.Fatalf("Join with a bad Advertise: %v, want a ConfigError naming cluster.Advertise", err)
	}
}

func waitFor(t testing.TB, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
