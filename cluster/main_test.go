package cluster

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/pgtest"
)

// leakIgnores are goroutines Proto.Actor leaves behind by design or by an
// upstream bug, never Chorus's: its throttles run forever, and its remote
// does not close the gRPC connections of endpoints to nodes already gone
// (they keep retrying until the process exits). Every other goroutine must
// be gone when the tests end.
var leakIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"), // ends a second after a dead letter
	goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransport"),
	goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"), // its name since grpc 1.6x
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // a child gets its DSN from the parent: no server of its own
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(stopPGAfter{m}, leakIgnores...)
}

// stopPGAfter runs the tests, then stops the throwaway PostgreSQL cluster
// if they started one, before goleak looks for leaked goroutines.
type stopPGAfter struct{ m *testing.M }

func (s stopPGAfter) Run() int {
	code := s.m.Run()
	pgtest.Stop()
	return code
}
