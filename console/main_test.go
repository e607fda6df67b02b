package console

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/pgtest"
)

// leakIgnores are the goroutines Proto.Actor's cluster leaves behind by
// design or by an upstream bug (the cluster test of this package starts a
// node): the same list as package cluster's.
var leakIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransport"),
	goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(stopPGAfter{m}, leakIgnores...) }

// stopPGAfter stops the throwaway PostgreSQL cluster, if the tests started
// one, before goleak looks for leaked goroutines.
type stopPGAfter struct{ m *testing.M }

func (s stopPGAfter) Run() int {
	code := s.m.Run()
	pgtest.Stop()
	return code
}
