package cluster

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// A leave that Proto.Actor panics in before stopping its remote (as its
// remote's graceful shutdown can) still stops the remote's gRPC server:
// the node's port is free after Close, no accept loop is left behind
// (goleak, at the end of the package), and the panic is logged.
func TestCloseStopsTheRemoteWhenTheLeavePanics(t *testing.T) {
	orig := leaveCluster
	leaveCluster = func(n *Node) {
		if !n.cfg.Client {
			orig(n)
			return
		}
		_ = n.cl.Config.ClusterProvider.Shutdown(true)
		n.sys.Shutdown()
		panic("endpoint manager: stop on a half-stopped remote")
	}
	defer func() { leaveCluster = orig }()

	addrs := freeAddrs(t, 2)
	members := joinAll(t, "leave", addrs[:1], nil)
	defer closeAll(t, members)
	var logs syncbuf.Buffer
	client, err := Join(context.Background(), Config{Name: "leave", Bind: addrs[1], Peers: addrs[:1], Client: true, RefreshInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.WaitMembers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", addrs[1]); err == nil {
		ln.Close()
		t.Fatalf("the check proves nothing: the client's remote does not hold %s", addrs[1])
	}
	if err := client.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addrs[1])
	if err != nil {
		t.Fatalf("after Close, the client's remote still holds its port: %v", err)
	}
	ln.Close()
	if got := logs.String(); !strings.Contains(got, "panicked while leaving") || !strings.Contains(got, "half-stopped remote") {
		t.Fatalf("the panic was not logged: %q", got)
	}
}
