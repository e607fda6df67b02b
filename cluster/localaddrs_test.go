package cluster

import (
	"net"
	"strconv"
	"testing"
)

// LocalAddrs gives distinct addresses whose port and port+1 can both be
// listened on, below the ephemeral range when it can.
func TestLocalAddrs(t *testing.T) {
	addrs, err := LocalAddrs(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s offered twice", a)
		}
		seen[a] = true
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		for _, q := range []int{port, port + 1} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				t.Fatalf("%s: port %d not free: %v", a, q, err)
			}
			l.Close()
		}
	}
}
