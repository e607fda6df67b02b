package mcptools

import (
	"context"
	"encoding/json"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/session"
)

// EffectFor is the effect a tool's annotations declare: read for
// readOnlyHint, idempotent_write for idempotentHint without readOnlyHint,
// and empty otherwise (or without annotations), so that the policy, else
// the default, decides. A Set applies it only to trusted servers' tools.
func EffectFor(a *Annotations) session.Effect {
	switch {
	case a == nil:
		return ""
	case a.ReadOnly:
		return session.EffectRead
	case a.Idempotent:
		return session.EffectIdempotentWrite
	}
	return ""
}

// ToolSet returns the current tools for pipeline.ToolLoop. Each runs its
// call through the Set: text and structured content become the result's
// text, images its parts; a result marked isError, a JSON-RPC error and a
// lost server become an error result the model sees.
func (s *Set) ToolSet() pipeline.ToolSet {
	set := pipeline.ToolSet{}
	for _, t := range s.Tools() {
		name := t.Name
		set[name] = pipeline.Tool{Definition: t.Definition, PartsFunc: func(ctx context.Context, args json.RawMessage) (string, []llm.Part, error) {
			r, err := s.call(ctx, name, args, "") // under the tool loop's execute_tool span
			if err != nil {
				return "", nil, err
			}
			if r.IsError {
				return "", nil, &ToolResultError{Server: t.Server, Tool: name, Text: r.modelText()}
			}
			return r.modelText(), r.Images, nil
		}}
	}
	return set
}

// SessionTools returns the current tools for session.Options.Tools. Each
// tool's Effect is its own declaration (Tool.Effect: its annotations when
// the server is trusted), under the session's policy and default like any
// Go tool's. A result marked isError is a *session.ToolError (failed, no
// retry); a JSON-RPC error, a lost server or a timeout is an error that
// follows the effect's retry rule. Images go to the session's media store,
// the journal keeps references. An idempotent write sends its idempotency
// key in the call's _meta (IdempotencyKeyMeta).
func (s *Set) SessionTools() []session.Tool {
	var out []session.Tool
	for _, t := range s.Tools() {
		name := t.Name
		out = append(out, session.Tool{Def: t.Definition, Effect: t.Effect, Handler: func(ctx context.Context, call session.Call) (session.Result, error) {
			r, err := s.call(ctx, name, call.Arguments, call.IdempotencyKey)
			if err != nil {
				return session.Result{}, err
			}
			if r.IsError {
				return session.Result{}, &session.ToolError{Msg: r.modelText()}
			}
			return session.Result{Content: r.modelText(), Images: r.Images}, nil
		}})
	}
	return out
}
