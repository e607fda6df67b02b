package providers

import "context"

type attemptHookKey struct{}

// WithAttemptHook returns a context whose calls report each of their
// attempts to fn as well, after the client's own observers: a per-call
// observer (the runtime's telemetry puts each attempt on its call's span).
// fn runs on the caller's goroutine; panics are recovered and discarded.
func WithAttemptHook(ctx context.Context, fn AttemptObserver) context.Context {
	return context.WithValue(ctx, attemptHookKey{}, fn)
}

// attemptHook runs ctx's attempt hook, if any.
func (c *Client) attemptHook(ctx context.Context, ev AttemptEvent) {
	if fn, ok := ctx.Value(attemptHookKey{}).(AttemptObserver); ok {
		c.callObserver(fn, ev)
	}
}
