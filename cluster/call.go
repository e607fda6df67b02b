package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/telemetry"
)

// Embed runs an embeddings request on a member of the cluster (round
// robin) and returns its result. A call whose member is lost runs again on
// another (an embedding is a read), up to 3 times. Cancelling ctx cancels
// the call on its member too.
func (n *Node) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	if req == nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "is nil"}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: err.Error()}
	}
	b, err := n.call(ctx, "embed", body)
	if err != nil {
		return nil, err
	}
	var res llm.EmbedResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, &ProtocolError{Msg: "undecodable embeddings result: " + err.Error()}
	}
	return &res, nil
}

// call runs one whole-answer call on a member, moving to another when the
// member is lost before it answers. When ctx ends first, the member is
// told to cancel the call (CallCancel).
func (n *Node) call(ctx context.Context, op string, body []byte) ([]byte, error) {
	ctx, release := n.bound(ctx)
	defer release()
	var lastErr error = errNoMembers
	start := n.rr.Add(1)
	for attempt := 0; attempt < 4; attempt++ {
		target := n.pickWorker(start, attempt)
		if target == nil {
			if !sleepCtx(ctx, 200*time.Millisecond) {
				return nil, ctx.Err()
			}
			continue
		}
		id := randUint64()
		r, err := ask(ctx, n.sys, target, &clusterpb.CallRequest{Op: op, RequestJson: body, Call: id, TraceContext: telemetry.Inject(ctx)})
		switch {
		case errors.Is(err, ErrNodeLost):
			lastErr = err
			continue
		case err != nil && ctx.Err() != nil:
			send(n.sys, target, &clusterpb.CallCancel{Call: id})
			return nil, err
		case err != nil:
			return nil, err
		}
		m, ok := r.(*clusterpb.CallReply)
		if !ok {
			return nil, &ProtocolError{Msg: fmt.Sprintf("unexpected call reply %T", r)}
		}
		if err := fromFailure(m.Err); movable(err) {
			lastErr = err
			continue
		}
		return m.ResultJson, fromFailure(m.Err)
	}
	return nil, lastErr
}

// movable reports whether a call that failed with err before it emitted
// anything may run again on another member: its member was lost, or is
// leaving and refused the call without running it (its runtime closes
// before it leaves the cluster, and refuses what it has not admitted:
// nothing reached the provider).
func movable(err error) bool {
	return errors.Is(err, ErrNodeLost) || errors.Is(err, runtime.ErrClosed) || errors.Is(err, ErrClosed)
}

// serveCall runs a whole-answer call for another node, off the worker's
// mailbox, and answers its sender. The call runs until it ends, the node
// closes, or the caller cancels it (cancelCall).
func (n *Node) serveCall(c actor.Context, m *clusterpb.CallRequest) {
	sender, sys := c.Sender(), c.ActorSystem()
	if sender == nil {
		return
	}
	answer := func(v any, err error) {
		r := &clusterpb.CallReply{Err: toFailure(err)}
		if err == nil {
			r.ResultJson, _ = json.Marshal(v)
		}
		send(sys, sender, r)
	}
	if n.rt == nil {
		answer(nil, errNoMembers)
		return
	}
	if !n.enter() {
		answer(nil, ErrClosed)
		return
	}
	ctx, cancel := context.WithCancel(telemetry.Extract(n.base, m.TraceContext))
	if m.Call != 0 {
		n.callsMu.Lock()
		if n.calls == nil {
			n.calls = map[uint64]context.CancelFunc{}
		}
		n.calls[m.Call] = cancel
		n.callsMu.Unlock()
	}
	go func() {
		defer n.wg.Done()
		defer func() {
			if m.Call != 0 {
				n.callsMu.Lock()
				delete(n.calls, m.Call)
				n.callsMu.Unlock()
			}
			cancel()
		}()
		switch m.Op {
		case "embed":
			var req llm.EmbedRequest
			if err := json.Unmarshal(m.RequestJson, &req); err != nil {
				answer(nil, &llm.ConfigError{Field: "request", Msg: "undecodable: " + err.Error()})
				return
			}
			res, err := n.rt.Embed(ctx, &req)
			answer(res, err)
		default:
			answer(nil, &llm.ConfigError{Field: "op", Msg: fmt.Sprintf("unknown call %q", m.Op)})
		}
	}()
}

// cancelCall cancels a call serveCall runs, at its caller's request. The
// request arrives after the call's own (one sender, one receiver: in
// order), so a call still running is found.
func (n *Node) cancelCall(m *clusterpb.CallCancel) {
	n.callsMu.Lock()
	cancel := n.calls[m.Call]
	n.callsMu.Unlock()
	if cancel != nil {
		cancel()
	}
}
