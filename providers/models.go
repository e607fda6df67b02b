package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/internal/wire"
	"github.com/chorusrt/chorus/providers/openai"
)

// ErrModelListTruncated is returned (wrapped) by ListModels when the
// provider still had pages after MaxModelPages. The models read so far come
// back with it, and are not cached.
var ErrModelListTruncated = errors.New("providers: model list truncated at the page cap")

// MaxModelPages caps how many pages one model listing reads. It is a
// variable so that an application can change it at start-up.
var MaxModelPages = 50

// DefaultModelCacheTTL is how long a Client keeps a model list.
const DefaultModelCacheTTL = 10 * time.Minute

// WithModelCacheTTL sets how long ListModels answers from the list it last
// fetched (default DefaultModelCacheTTL); zero or negative turns the cache
// off, though concurrent callers still share one fetch.
func WithModelCacheTTL(d time.Duration) Option {
	return func(c *Client) {
		mc := c.modelCache()
		mc.mu.Lock()
		mc.ttl = d
		mc.mu.Unlock()
	}
}

// modelCache is a Client's model list and the fetch in flight.
type modelCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	models  []llm.ModelInfo
	fetched time.Time
	valid   bool
	flight  *modelFlight
}

// modelFlight is one fetch shared by every caller that asked while it ran.
type modelFlight struct {
	done    chan struct{}
	models  []llm.ModelInfo
	err     error
	waiters int
	cancel  context.CancelFunc
}

// modelCaches holds each Client's modelCache, keyed weakly so that a Client
// that is no longer used is collected together with its entry. (The state
// lives beside the Client rather than in it so that this file adds the
// feature without touching the Client's definition.)
var modelCaches sync.Map // weak.Pointer[Client] -> *modelCache

func (c *Client) modelCache() *modelCache {
	key := weak.Make(c)
	if v, ok := modelCaches.Load(key); ok {
		return v.(*modelCache)
	}
	mc := &modelCache{ttl: DefaultModelCacheTTL}
	v, loaded := modelCaches.LoadOrStore(key, mc)
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[Client]) { modelCaches.Delete(k) }, key)
	}
	return v.(*modelCache)
}

// ListModels returns the models the provider lists: OpenAI-format GET
// /models (data[] or models[]; pages via has_more/last_id where a server
// paginates), Anthropic GET /v1/models (limit=100, after_id), Gemini GET
// /v1beta/models (pageSize=100, pageToken; the "models/" prefix dropped).
// Context window, output limit, display name, creation time and
// capabilities are filled only where the provider reports them: unknown
// stays zero.
//
// Every page goes through the retry ladder (Op "list_models") and the
// whole listing runs under one call budget. Past MaxModelPages pages the
// listing stops with ErrModelListTruncated, returning what it read. A
// complete list is cached for the model-cache TTL (empty lists included);
// concurrent callers share one fetch, and each caller gets its own deep
// copy. A caller whose ctx ends stops waiting; the shared fetch is
// cancelled only when no caller waits for it any more.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	mc := c.modelCache()
	mc.mu.Lock()
	if mc.valid && mc.ttl > 0 && time.Since(mc.fetched) < mc.ttl {
		out := cloneModels(mc.models)
		mc.mu.Unlock()
		return out, nil
	}
	f := mc.flight
	if f == nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &modelFlight{done: make(chan struct{}), cancel: cancel}
		mc.flight = f
		go c.fetchModels(fctx, mc, f)
	}
	f.waiters++
	mc.mu.Unlock()

	select {
	case <-f.done:
		mc.leave(f)
		return cloneModels(f.models), f.err
	case <-ctx.Done():
		mc.leave(f)
		return nil, ctxErr(ctx)
	}
}

// leave drops one waiter; the last one to leave an unfinished fetch cancels
// it and detaches it, so the next caller starts afresh.
func (mc *modelCache) leave(f *modelFlight) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	f.waiters--
	if f.waiters > 0 {
		return
	}
	select {
	case <-f.done:
	default:
		f.cancel()
		if mc.flight == f {
			mc.flight = nil
		}
	}
}

func (c *Client) fetchModels(ctx context.Context, mc *modelCache, f *modelFlight) {
	defer f.cancel()
	models, err := c.listAllModels(ctx)
	mc.mu.Lock()
	f.models, f.err = models, err
	if err == nil && mc.ttl > 0 {
		mc.models, mc.fetched, mc.valid = models, time.Now(), true
	}
	if mc.flight == f {
		mc.flight = nil
	}
	mc.mu.Unlock()
	close(f.done)
}

// listAllModels reads every page, up to MaxModelPages.
func (c *Client) listAllModels(ctx context.Context) ([]llm.ModelInfo, error) {
	var build func(cursor string, o wire.BuildOptions) *wire.Request
	var parse func(body []byte) ([]llm.ModelInfo, string, error)
	switch c.cfg.Format {
	case FormatAnthropic:
		build, parse = anthropic.ModelsRequest, anthropic.ParseModels
	case FormatGemini:
		build, parse = gemini.ModelsRequest, gemini.ParseModels
	default:
		build, parse = openai.ModelsRequest, openai.ParseModels
	}
	ctx, cancel := c.budget(ctx)
	defer cancel()
	all := []llm.ModelInfo{}
	cursor := ""
	for page := 1; ; page++ {
		if page > MaxModelPages {
			return all, fmt.Errorf("%w: %s still had pages after %d", ErrModelListTruncated, c.cfg.ID, MaxModelPages)
		}
		var models []llm.ModelInfo
		var next string
		_, err := c.opCall(ctx, "list_models", "", build(cursor, c.buildOpts(false, c.learned.snapshot())), func(_ *http.Response, body []byte) error {
			var err error
			models, next, err = parse(body)
			return err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, models...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// cloneModels deep-copies a model list; nil stays nil.
func cloneModels(in []llm.ModelInfo) []llm.ModelInfo {
	if in == nil {
		return nil
	}
	out := make([]llm.ModelInfo, len(in))
	for i, m := range in {
		if m.Capabilities != nil {
			m.Capabilities = append([]string(nil), m.Capabilities...)
		}
		out[i] = m
	}
	return out
}
