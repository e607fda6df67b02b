package gateway

import (
	"context"
	"net/http"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/runtime"
)

// The response cache's headers: the client's x-chorus-cache asks a mode
// (on, read_only, write_only, off) for its call; the answer's says hit or
// miss when the runtime has a cache (runtime.WithCache).
const hdrCache = "X-Chorus-Cache"

// cacheContext returns ctx with the call's cache mode, from the request's
// x-chorus-cache header, and its namespace: the gateway key's name, so
// that one key never reads another's answers, or one namespace for every
// key with Options.CacheShareAcrossKeys. An unknown mode is a 400 naming
// the header.
func (h *Handler) cacheContext(ctx context.Context, r *http.Request, ks *keyState) (context.Context, *Error) {
	if v := r.Header.Get(hdrCache); v != "" {
		m, err := cache.ParseMode("x-chorus-cache", v)
		if err != nil {
			return ctx, &Error{Status: http.StatusBadRequest, Message: "header " + err.Error(), NoRetry: true}
		}
		ctx = runtime.WithCacheMode(ctx, m)
	}
	return runtime.WithCacheNamespace(ctx, h.cacheNamespace(ks)), nil
}

// cacheNamespace is the cache namespace of a key's calls, its batches'
// lines included.
func (h *Handler) cacheNamespace(ks *keyState) string {
	if ks != nil && !h.opts.CacheShareAcrossKeys {
		return "key:" + ks.key.Name
	}
	return "shared"
}

// cacheHeader says whether the answer came from the cache.
func cacheHeader(hd http.Header, rep *runtime.CallReport) {
	if rep.Cache != "" {
		hd[hdrCache] = []string{rep.Cache}
	}
}

// charged is the usage a call charges to its key's tokens per minute: its
// answer's, or none when the cache answered it (a hit used no provider
// tokens; its cost, zero, is what it charges to the key's budget).
func charged(rep *runtime.CallReport, u llm.Usage) llm.Usage {
	if rep != nil && rep.Cache == "hit" {
		return llm.Usage{}
	}
	return u
}
