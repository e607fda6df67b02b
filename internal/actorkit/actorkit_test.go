package actorkit

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ping struct{ n int }
type pong struct{ n int }

// echo answers a ping with a pong after its delay; a silent one never
// answers.
type echo struct {
	delay  time.Duration
	silent bool
}

func (e echo) Receive(c actor.Context) {
	if p, ok := c.Message().(ping); ok && !e.silent {
		time.Sleep(e.delay)
		c.Respond(pong{p.n})
	}
}

func spawn(t *testing.T, s *System, e echo) *actor.PID {
	t.Helper()
	pid := s.Sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return e }))
	t.Cleanup(func() { _ = s.Sys.Root.StopFuture(pid).Wait() })
	return pid
}

func TestAsk(t *testing.T) {
	s := Shared(nil)
	defer s.Release()
	ctx := context.Background()
	pid := spawn(t, s, echo{})

	if r, err := Ask[pong](ctx, s.Sys, pid, ping{7}, AskOptions{}); err != nil || r.n != 7 {
		t.Fatalf("answer: %v %v", r, err)
	}
	var ue *UnexpectedReplyError
	if _, err := Ask[ping](ctx, s.Sys, pid, ping{1}, AskOptions{}); !errors.As(err, &ue) {
		t.Fatalf("answer of another type: %v", err)
	}
	// An answer wins over a watch that ends after it.
	if r, err := Ask[pong](ctx, s.Sys, pid, ping{2}, AskOptions{Watch: true}); err != nil || r.n != 2 {
		t.Fatalf("watched answer: %v %v", r, err)
	}

	// A dead target: not delivered, or (watched) terminated.
	dead := s.Sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return echo{} }))
	_ = s.Sys.Root.StopFuture(dead).Wait()
	if _, err := Ask[pong](ctx, s.Sys, dead, ping{3}, AskOptions{}); !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("dead target: %v", err)
	}
	if _, err := Ask[pong](ctx, s.Sys, dead, ping{3}, AskOptions{Watch: true}); !errors.Is(err, ErrTerminated) && !errors.Is(err, ErrNotDelivered) {
		t.Fatalf("dead watched target: %v", err)
	}

	// A watched target that stops while the ask waits.
	silent := s.Sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return echo{silent: true} }))
	go func() { time.Sleep(20 * time.Millisecond); s.Sys.Root.Stop(silent) }()
	if _, err := Ask[pong](ctx, s.Sys, silent, ping{4}, AskOptions{Watch: true}); !errors.Is(err, ErrTerminated) {
		t.Fatalf("target stopped while waiting: %v", err)
	}

	// Until ends the wait.
	mute := spawn(t, s, echo{silent: true})
	until := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(until) })
	if _, err := Ask[pong](ctx, s.Sys, mute, ping{5}, AskOptions{Until: until}); !errors.Is(err, ErrStopped) {
		t.Fatalf("until: %v", err)
	}

	// ctx ends the wait.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := Ask[pong](cctx, s.Sys, mute, ping{6}, AskOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx: %v", err)
	}
}

// One process, one system: every holder of the shared system has the same
// one, each holder's logger gets Proto.Actor's lines while it holds it
// (once per distinct handler), and a released holder gets none.
func TestSharedSystemRoutesLogs(t *testing.T) {
	var a, b syncbuf.Buffer
	la := slog.New(slog.NewTextHandler(&a, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lb := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s1, s2, s3 := Shared(la), Shared(lb), Shared(la)
	if s1.Sys != s2.Sys || s2.Sys != s3.Sys {
		t.Fatal("two shared systems in one process")
	}
	s1.Sys.Logger().Warn("first", slog.Int("n", 1))
	s2.Release()
	s2.Release()
	s1.Sys.Logger().With(slog.String("k", "v")).Warn("second")
	s1.Release()
	s3.Release()
	s1.Sys.Logger().Warn("third")
	if got := strings.Count(a.String(), "msg=first"); got != 1 || !strings.Contains(a.String(), "component=protoactor") {
		t.Fatalf("holder a got %q: want the first line once, with its component", a.String())
	}
	if !strings.Contains(a.String(), "msg=second component=protoactor k=v") || strings.Contains(b.String(), "second") {
		t.Fatalf("after b released: a %q, b %q", a.String(), b.String())
	}
	if strings.Contains(a.String(), "third") || strings.Contains(b.String(), "third") {
		t.Fatal("a line reached a released holder")
	}
}
