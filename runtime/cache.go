package runtime

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/telemetry"
)

// attrCache marks the span of a call answered from the cache.
const attrCache = attribute.Key("chorus.cache")

// traceHit records a hit as an inference span of its own, marked
// chorus.cache=hit, with no token usage: the provider served none (the
// stored usage is in the answer and the CallReport).
func (rt *Runtime) traceHit(ctx context.Context, req *llm.ChatRequest, targets []target, stream bool, res *llm.ChatResult) {
	_, tr := rt.startTrace(ctx, telemetry.OpChat, req.Model, targets, stream)
	tr.tc.Span().SetAttributes(attrCache.String("hit"))
	tr.tc.End(res, res.Meta, llm.Usage{}, nil)
}

// CacheOptions configure the runtime's response cache.
type CacheOptions struct {
	// Namespace is the namespace of a call that names none
	// (WithCacheNamespace); default "".
	Namespace string
}

// cacheHook is the runtime's cache and its options.
type cacheHook struct {
	c    *cache.Cache
	opts CacheOptions
}

// WithCache answers calls from c (package cache): Chat and Stream look
// the request up under its canonical key (cache.Key of the targets the
// model resolves to) before asking a provider, identical calls in flight
// wait for the first, and a complete answer is stored. A hit costs
// nothing: it returns the stored answer with its usage, CallReport.Cache
// "hit" and a cost of zero; a Stream replays it as events (deltas, tool
// calls, usage, finish). The per-call mode and namespace come from the
// context (WithCacheMode, WithCacheNamespace). The runtime does not close
// c.
func WithCache(c *cache.Cache, opts CacheOptions) Option {
	return func(o *options) {
		if c == nil {
			o.err = &llm.ConfigError{Field: "cache", Msg: "is nil"}
			return
		}
		o.cache = &cacheHook{c: c, opts: opts}
	}
}

type cacheNamespaceKey struct{}

// WithCacheMode returns a context whose calls use the cache in mode m
// (cache.On, ReadOnly, WriteOnly, Off) rather than the cache's default;
// it is cache.WithMode.
func WithCacheMode(ctx context.Context, m cache.Mode) context.Context {
	return cache.WithMode(ctx, m)
}

// WithCacheNamespace returns a context whose calls read and write the
// cache's entries of namespace ns.
func WithCacheNamespace(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, cacheNamespaceKey{}, ns)
}

// CacheStats returns the counts of the runtime's cache, and false when it
// has none.
func (rt *Runtime) CacheStats() (cache.Stats, bool) {
	if rt.opts.cache == nil {
		return cache.Stats{}, false
	}
	return rt.opts.cache.c.Stats(), true
}

// lookup returns the cache, the call's mode, namespace and key; c is nil
// when the call does not use a cache.
func (h *cacheHook) lookup(ctx context.Context, req *llm.ChatRequest, targets []target) (c *cache.Cache, m cache.Mode, ns, key string) {
	if h == nil {
		return nil, "", "", ""
	}
	m = h.c.Mode(cache.ModeOf(ctx))
	if m == cache.Off {
		return nil, m, "", ""
	}
	ns = h.opts.Namespace
	if v, ok := ctx.Value(cacheNamespaceKey{}).(string); ok {
		ns = v
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return h.c, m, ns, cache.Key(strings.Join(names, ","), req)
}

// hit marks the call's reports as answered from the cache, at no cost.
func hit(ctx context.Context, rep *CallReport, targets []target) {
	if cr := cache.ReportOf(ctx); cr != nil {
		cr.Outcome = cache.Hit
	}
	if rep == nil {
		return
	}
	rep.Cache = "hit"
	rep.Model = targets[0].name
	rep.Provider = targets[0].g.id
	rep.Cost, rep.Priced = 0, true
}

func missed(ctx context.Context, rep *CallReport) {
	if cr := cache.ReportOf(ctx); cr != nil {
		cr.Outcome = cache.Miss
	}
	if rep != nil {
		rep.Cache = "miss"
	}
}

// cachedChat is Chat through the cache.
func (rt *Runtime) cachedChat(ctx context.Context, req *llm.ChatRequest, targets []target) (*llm.ChatResult, error) {
	c, m, ns, key := rt.opts.cache.lookup(ctx, req, targets)
	if c == nil {
		return rt.chat(ctx, req, targets)
	}
	if err := rt.enter(); err != nil {
		return nil, err
	}
	rt.calls.Done()
	res, out, err := c.Do(ctx, m, ns, key, func(ctx context.Context) (*llm.ChatResult, error) {
		return rt.chat(ctx, req, targets)
	})
	rep := reportOf(ctx)
	if out == cache.Hit {
		hit(ctx, rep, targets)
		rt.traceHit(ctx, req, targets, false, res)
	} else {
		missed(ctx, rep)
	}
	return res, err
}

// cachedStream is Stream through the cache: a hit is replayed, a call
// identical to one in flight waits for it, and a miss streams live from
// the provider while its answer is kept for the store.
func (rt *Runtime) cachedStream(ctx context.Context, req *llm.ChatRequest, targets []target) (*llm.Stream, error) {
	c, m, ns, key := rt.opts.cache.lookup(ctx, req, targets)
	if c == nil {
		return rt.stream(ctx, req, targets)
	}
	rep := reportOf(ctx)
	// live streams the provider's answer through w, stores it when the
	// mode writes and lands f (when leading) before the caller gets the
	// end: the next identical call is a hit, and the followers copy the
	// answer before the caller may change it.
	live := func(sctx context.Context, w *llm.StreamWriter, f *cache.Flight) {
		inner, err := rt.stream(sctx, req, targets)
		if err != nil {
			if f != nil {
				f.Land(nil)
			}
			w.Finish(nil, err)
			return
		}
		res, err := pipe(inner, w)
		if err == nil && m.Writes() {
			c.Put(context.WithoutCancel(sctx), ns, key, res)
		}
		if f != nil {
			share := res
			if err != nil {
				share = nil
			}
			f.Land(share)
		}
		w.Finish(res, err)
	}
	if !m.Reads() {
		missed(ctx, rep)
		return rt.replay(ctx, nil, func(sctx context.Context, w *llm.StreamWriter) { live(sctx, w, nil) })
	}
	if res, ok := c.Get(ctx, ns, key); ok {
		hit(ctx, rep, targets)
		rt.traceHit(ctx, req, targets, true, res)
		return rt.replay(ctx, res, nil)
	}
	f, leader := c.Join(ns, key)
	if leader {
		missed(ctx, rep)
		s, err := rt.replay(ctx, nil, func(sctx context.Context, w *llm.StreamWriter) { live(sctx, w, f) })
		if err != nil {
			f.Land(nil)
		}
		return s, err
	}
	return rt.replay(ctx, nil, func(sctx context.Context, w *llm.StreamWriter) {
		if res, ok := f.Wait(sctx); ok {
			hit(ctx, rep, targets)
			rt.traceHit(ctx, req, targets, true, res)
			if !cache.Replay(res, w.Emit) {
				w.Finish(nil, sctx.Err())
				return
			}
			w.Finish(res, nil)
			return
		}
		missed(ctx, rep)
		live(sctx, w, nil)
	})
}

// replay returns a stream produced by run on a goroutine of its own, or,
// when run is nil, one that replays res.
func (rt *Runtime) replay(ctx context.Context, res *llm.ChatResult, run func(context.Context, *llm.StreamWriter)) (*llm.Stream, error) {
	if err := rt.enter(); err != nil {
		return nil, err
	}
	cctx, done := rt.callCtx(ctx)
	s, w, sctx := llm.NewStream(cctx, rt.opts.streamBuffer)
	if run == nil {
		run = func(sctx context.Context, w *llm.StreamWriter) {
			if !cache.Replay(res, w.Emit) {
				w.Finish(nil, sctx.Err())
				return
			}
			w.Finish(res, nil)
		}
	}
	go func() {
		defer done()
		run(sctx, w)
	}()
	return s, nil
}

// pipe forwards inner's events to w until inner ends or w's reader goes
// away (which closes inner), and returns inner's result.
func pipe(inner *llm.Stream, w *llm.StreamWriter) (*llm.ChatResult, error) {
	for ev := range inner.Events() {
		if !w.Emit(ev) {
			inner.Close()
			break
		}
	}
	return inner.Result()
}
