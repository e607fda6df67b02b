package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/cluster/clusterpb"
)

type echoActor struct{}

func (echoActor) Receive(c actor.Context) {
	if m, ok := c.Message().(*clusterpb.Credit); ok {
		respond(c, m)
	}
}

// BenchmarkRemoteRoundTrip is the floor under every remote call: one proto
// message to an actor on another node (in this process, over loopback
// gRPC) and its reply, with a future and with the watched ask the
// cluster's calls use.
func BenchmarkRemoteRoundTrip(b *testing.B) {
	a, w := benchPair(b, "ping", nil)
	pid, _ := w.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return echoActor{} }), "echo")
	target := actor.NewPID(w.Address(), pid.Id)
	b.Run("future", func(b *testing.B) {
		for b.Loop() {
			if _, err := request(a.sys, target, &clusterpb.Credit{Stream: 1}, 5*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("watched", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if _, err := ask(ctx, a.sys, target, &clusterpb.Credit{Stream: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
