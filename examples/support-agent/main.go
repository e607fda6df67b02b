// Support-agent runs a durable agent session (package session): a support
// agent that looks orders up (a read, no approval) and refunds them (a
// non-idempotent write, which waits for a person's approval). The session's
// journal is a SQLite file; the program prints each approval request, then
// approves it itself, as a support lead would from an approval UI.
//
//	go run ./examples/support-agent                   # on the simulator
//	go run ./examples/support-agent -m openai/gpt-4.1-mini
//
// The simulator calls every tool the user message names (with the JSON
// object that follows the name as arguments) and, once it sees the
// results, answers with a text that lists them; so the first turn looks
// the order up and the second refunds it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/sim"
	"github.com/chorusrt/chorus/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "support-agent:", err)
		os.Exit(1)
	}
}

// orders is the shop's order book.
var orders = map[string]struct {
	Item        string
	AmountCents int
	Status      string
}{"A-1001": {"kettle", 4999, "delivered, reported broken"}}

// refunds counts the refunds the payment system made, by order.
var refunds = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

var tools = []session.Tool{
	{
		Def: llm.Tool{Name: "lookup_order", Description: "Look an order up by id",
			Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
		Effect: session.EffectRead,
		Handler: func(_ context.Context, c session.Call) (session.Result, error) {
			var a struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return session.Result{}, session.ToolErrorf("bad arguments: %v", err)
			}
			o, ok := orders[a.OrderID]
			if !ok {
				return session.Result{}, session.ToolErrorf("there is no order %q", a.OrderID)
			}
			b, _ := json.Marshal(map[string]any{"order_id": a.OrderID, "item": o.Item, "amount_cents": o.AmountCents, "status": o.Status})
			return session.Result{Content: string(b)}, nil
		},
	},
	{
		Def: llm.Tool{Name: "refund", Description: "Refund an order to the customer's card",
			Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`)},
		// A refund is not idempotent: it runs at most once, after approval.
		Effect: session.EffectNonIdempotentWrite,
		Handler: func(_ context.Context, c session.Call) (session.Result, error) {
			var a struct {
				OrderID     string `json:"order_id"`
				AmountCents int    `json:"amount_cents"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return session.Result{}, session.ToolErrorf("bad arguments: %v", err)
			}
			o, ok := orders[a.OrderID]
			if !ok || a.AmountCents <= 0 || a.AmountCents > o.AmountCents {
				return session.Result{}, session.ToolErrorf("cannot refund %d cents on order %q", a.AmountCents, a.OrderID)
			}
			refunds.Lock()
			refunds.n[a.OrderID]++
			refunds.Unlock()
			return session.Result{Content: fmt.Sprintf(`{"refund_id":"R-%s","amount_cents":%d}`, a.OrderID, a.AmountCents)}, nil
		},
	},
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("support-agent", flag.ContinueOnError)
	model := fs.String("m", "sim/support", "model (provider/model or an alias)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	w = &lockedWriter{w: w} // events print from their own goroutine
	s, err := sim.Start(sim.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	dir, err := os.MkdirTemp("", "support-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	journal, err := store.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		return err
	}
	defer journal.Close()
	m, err := session.New(session.Options{
		Journal:      journal,
		Model:        rt,
		ModelName:    *model,
		Instructions: "You are a support agent for a shop. Look orders up before acting, and refund only what the customer paid.",
		Tools:        tools,
		Media:        session.NewLocalMedia(filepath.Join(dir, "media")),
	})
	if err != nil {
		return err
	}
	defer m.Close(context.Background())

	const id = "support-42"
	events, stopEvents := m.Events(id, 0)
	defer stopEvents()
	approvals := make(chan session.Event, 8)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for ev := range events {
			switch ev.Type {
			case session.EventToolCallStarted:
				fmt.Fprintf(w, "  [turn %d step %d] %s (%s) started, attempt %d\n", ev.Turn, ev.Step, ev.ToolName, ev.Effect, ev.Attempt)
			case session.EventToolCallFinished:
				fmt.Fprintf(w, "  [turn %d step %d] %s %s\n", ev.Turn, ev.Step, ev.ToolName, ev.ToolStatus)
			case session.EventApprovalRequested:
				approvals <- ev
			}
		}
	}()

	for _, text := range []string{
		`My kettle from order A-1001 arrived broken. Please lookup_order {"order_id":"A-1001"}.`,
		`Yes, please refund {"order_id":"A-1001","amount_cents":4999}.`,
	} {
		fmt.Fprintf(w, "customer: %s\n", text)
		if err := m.Send(ctx, id, llm.UserText(text)); err != nil {
			return err
		}
		res, err := waitApproving(ctx, w, m, id, approvals)
		if err != nil {
			return err
		}
		if res.Status != session.TurnCompleted {
			return fmt.Errorf("turn %d %s: %s", res.Turn, res.Status, res.Error)
		}
		fmt.Fprintf(w, "agent: %s\n", strings.TrimSpace(res.Answer))
	}

	snap, err := m.Snapshot(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "tool records:")
	for _, r := range snap.Tools {
		fmt.Fprintf(w, "  turn %d %s %s (%s): %s %s\n", r.Turn, r.Name, r.Arguments, r.Effect, r.Status, r.Result)
	}
	refunds.Lock()
	fmt.Fprintf(w, "refunds made: %d; %d model calls, %d tokens in, %d out\n", refunds.n["A-1001"], snap.ModelCalls, snap.Usage.InputTokens(), snap.Usage.CompletionTokens)
	refunds.Unlock()
	stopEvents()
	<-printed
	return nil
}

// waitApproving waits for the turn to end, approving each approval request
// as it comes (after printing it), as a person would from an approval UI.
func waitApproving(ctx context.Context, w io.Writer, m *session.Manager, id string, approvals <-chan session.Event) (session.TurnResult, error) {
	type waited struct {
		res session.TurnResult
		err error
	}
	done := make(chan waited, 1)
	go func() {
		res, err := m.Wait(ctx, id)
		done <- waited{res, err}
	}()
	for {
		select {
		case ev := <-approvals:
			snap, err := m.Snapshot(ctx, id)
			if err != nil {
				return session.TurnResult{}, err
			}
			for _, p := range snap.Pending {
				if p.ID == ev.Interrupt {
					fmt.Fprintf(w, "approval requested: %s %s (interrupt %s)\n", p.Call.Name, p.Call.Arguments, p.ID)
				}
			}
			fmt.Fprintln(w, "support lead: approved")
			if err := m.Resolve(ctx, id, ev.Interrupt, true, "approved by the support lead"); err != nil {
				return session.TurnResult{}, err
			}
		case r := <-done:
			return r.res, r.err
		}
	}
}

// lockedWriter serializes writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
