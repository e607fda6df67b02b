package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Mode says whether a call reads the cache, writes it, both or neither
// (TensorZero's names).
type Mode string

// The modes. The zero value is the cache's default mode (Options.Mode).
const (
	On        Mode = "on"         // read, and write on a miss
	ReadOnly  Mode = "read_only"  // read; a miss is not stored
	WriteOnly Mode = "write_only" // always ask the provider, store the answer
	Off       Mode = "off"        // as if there were no cache
)

// ParseMode returns the mode named s ("on", "read_only", "write_only",
// "off"), or an *llm.ConfigError naming field.
func ParseMode(field, s string) (Mode, error) {
	switch m := Mode(s); m {
	case On, ReadOnly, WriteOnly, Off:
		return m, nil
	}
	return "", &llm.ConfigError{Field: field, Msg: fmt.Sprintf("unknown cache mode %q (on, read_only, write_only, off)", s)}
}

// Reads reports whether a call in mode m looks its answer up.
func (m Mode) Reads() bool { return m == On || m == ReadOnly }

// Writes reports whether a call in mode m stores its answer.
func (m Mode) Writes() bool { return m == On || m == WriteOnly }

// Entry is one stored answer.
type Entry struct {
	Namespace string
	Key       string
	// Value is the encoded answer (opaque to a store).
	Value   []byte
	Created time.Time
	// Expires is when the entry stops being served; zero: never.
	Expires time.Time
}

// Store keeps entries. Implementations are safe for concurrent use; the
// conformance suite in cache/cachetest says exactly what they guarantee.
type Store interface {
	// Get returns the value stored under (namespace, key) that has not
	// expired at now; ok is false when there is none.
	Get(ctx context.Context, namespace, key string, now time.Time) (value []byte, ok bool, err error)
	// Put stores e, replacing an entry under the same namespace and key,
	// and evicts entries past the store's size cap.
	Put(ctx context.Context, e Entry) error
	// Close releases the store.
	Close() error
}

// Limits cap a store's size. Zero fields are unlimited.
type Limits struct {
	MaxEntries int
	// MaxBytes bounds the sum of the entries' sizes (namespace, key and
	// value bytes).
	MaxBytes int64
}

// Validate names the first limit that cannot hold.
func (l Limits) Validate() error {
	if l.MaxEntries < 0 {
		return &llm.ConfigError{Field: "max_entries", Msg: "is negative"}
	}
	if l.MaxBytes < 0 {
		return &llm.ConfigError{Field: "max_bytes", Msg: "is negative"}
	}
	return nil
}

// Options configure a Cache.
type Options struct {
	// TTL is how long an entry is served (zero: until evicted).
	TTL time.Duration
	// Mode is the mode of a call that names none (default On).
	Mode Mode
	// StoreContentFilter also stores answers that finished
	// content_filter.
	StoreContentFilter bool
	// Logger receives a line per store failure (default: silent).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// Stats count what a Cache did.
type Stats struct {
	Hits, Misses int64
	// Coalesced counts calls answered by an identical call in flight
	// (counted among the Misses too: the store did not have the answer).
	Coalesced int64
	// Stored counts answers written; Skipped answers not stored because
	// they were not complete (an error, a partial stream, a finish other
	// than stop, length or tool_calls, missing usage).
	Stored, Skipped int64
	// Errors counts store failures (the call went on as uncached).
	Errors int64
}

// Cache is an exact response cache over a Store. It is safe for
// concurrent use.
type Cache struct {
	store  Store
	opts   Options
	logger *slog.Logger

	mu      sync.Mutex
	flights map[string]*Flight

	hits, misses, coalesced, stored, skipped, errs atomic.Int64
}

// New returns a cache over store, or an *llm.ConfigError naming the
// option that cannot hold.
func New(store Store, opts Options) (*Cache, error) {
	if store == nil {
		return nil, &llm.ConfigError{Field: "store", Msg: "is nil"}
	}
	if opts.TTL < 0 {
		return nil, &llm.ConfigError{Field: "ttl", Msg: "is negative"}
	}
	if opts.Mode == "" {
		opts.Mode = On
	}
	if _, err := ParseMode("mode", string(opts.Mode)); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cache{store: store, opts: opts, logger: logger, flights: map[string]*Flight{}}, nil
}

// Mode returns m, the cache's default mode when m is empty, and Off for
// a value that is no mode (the cache neither read nor written).
func (c *Cache) Mode(m Mode) Mode {
	switch m {
	case "":
		return c.opts.Mode
	case On, ReadOnly, WriteOnly, Off:
		return m
	}
	return Off
}

// Close closes the store.
func (c *Cache) Close() error { return c.store.Close() }

// Stats returns the counts so far.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Coalesced: c.coalesced.Load(),
		Stored: c.stored.Load(), Skipped: c.skipped.Load(), Errors: c.errs.Load(),
	}
}

// Get returns the answer stored under (namespace, key), counting a hit
// or a miss. A store that fails or holds an entry that cannot be decoded
// is a miss, counted in Stats.Errors and logged.
func (c *Cache) Get(ctx context.Context, namespace, key string) (*llm.ChatResult, bool) {
	if m, ok := c.store.(*Memory); ok {
		// The memory store keeps the decoded answer beside its bytes.
		res, ok, err := m.getResult(namespace, key, c.opts.Now())
		if err != nil {
			c.failed("get", err)
			c.misses.Add(1)
			return nil, false
		}
		if !ok {
			c.misses.Add(1)
			return nil, false
		}
		c.hits.Add(1)
		return Clone(res), true
	}
	v, ok, err := c.store.Get(ctx, namespace, key, c.opts.Now())
	if err != nil {
		c.failed("get", err)
		c.misses.Add(1)
		return nil, false
	}
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	res, err := decode(v)
	if err != nil {
		c.failed("decode", err)
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return res, true
}

// Storable reports whether res is a complete answer the cache keeps:
// finished stop, length or tool_calls (content_filter when
// Options.StoreContentFilter), with usage.
func (c *Cache) Storable(res *llm.ChatResult) bool {
	if res == nil || res.Usage.IsZero() {
		return false
	}
	switch res.FinishReason {
	case llm.FinishStop, llm.FinishLength, llm.FinishToolCalls:
		return true
	case llm.FinishContentFilter:
		return c.opts.StoreContentFilter
	}
	return false
}

// Put stores res under (namespace, key) when it is Storable, and reports
// whether it did. A store failure is counted and logged, never returned.
func (c *Cache) Put(ctx context.Context, namespace, key string, res *llm.ChatResult) bool {
	if !c.Storable(res) {
		c.skipped.Add(1)
		return false
	}
	v, err := encode(res)
	if err != nil {
		c.failed("encode", err)
		return false
	}
	now := c.opts.Now()
	e := Entry{Namespace: namespace, Key: key, Value: v, Created: now}
	if c.opts.TTL > 0 {
		e.Expires = now.Add(c.opts.TTL)
	}
	var err2 error
	if m, ok := c.store.(*Memory); ok {
		err2 = m.putResult(e, Clone(res))
	} else {
		err2 = c.store.Put(ctx, e)
	}
	if err := err2; err != nil {
		c.failed("put", err)
		return false
	}
	c.stored.Add(1)
	return true
}

func (c *Cache) failed(op string, err error) {
	c.errs.Add(1)
	c.logger.Warn("chorus: response cache store failed; the call goes on uncached", "op", op, "err", err)
}

// Flight is one call in flight for a (namespace, key): its leader fetches
// the answer, identical calls that arrive meanwhile wait for it.
type Flight struct {
	c    *Cache
	id   string
	done chan struct{}
	val  []byte // the leader's answer, encoded when it landed; nil: none to share
	// waiters counts the followers (guarded by c.mu): with none, Land
	// encodes nothing.
	waiters int
}

// Join returns the flight of (namespace, key), and whether the caller
// leads it: a leader fetches the answer and must call Land once, with
// the answer or nil; a follower calls Wait.
func (c *Cache) Join(namespace, key string) (f *Flight, leader bool) {
	id := namespace + "\x00" + key
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[id]; f != nil {
		f.waiters++
		return f, false
	}
	f = &Flight{c: c, id: id, done: make(chan struct{})}
	c.flights[id] = f
	return f, true
}

// Land ends the leader's flight with its answer (nil when the call
// failed or its answer is not Storable): the followers get a storable
// answer, and fetch on their own otherwise. Call it before handing res to
// anyone who may change it.
func (f *Flight) Land(res *llm.ChatResult) {
	f.c.mu.Lock()
	if f.c.flights[f.id] == f {
		delete(f.c.flights, f.id)
	}
	waiters := f.waiters
	f.c.mu.Unlock()
	if waiters > 0 && f.c.Storable(res) {
		// Encoded now, before the leader's caller holds res: the followers
		// decode copies of their own while it may change its answer.
		f.val, _ = encode(res)
	}
	close(f.done)
}

// Wait waits for the leader and returns a copy of its answer; ok is
// false when the leader had none to share or ctx ended first.
func (f *Flight) Wait(ctx context.Context) (*llm.ChatResult, bool) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, false
	}
	if f.val == nil {
		return nil, false
	}
	res, err := decode(f.val)
	if err != nil {
		return nil, false
	}
	f.c.coalesced.Add(1)
	return res, true
}

// Outcome says how Do answered.
type Outcome string

// Outcomes.
const (
	Hit    Outcome = "hit"    // from the store, or from an identical call in flight
	Miss   Outcome = "miss"   // from the provider
	Bypass Outcome = "bypass" // mode off: the cache was not consulted
)

// Do answers a buffered call in mode m: from the store when m reads, from
// an identical call in flight, or from fetch, whose complete answer is
// stored when m writes. fetch's error is returned as is.
func (c *Cache) Do(ctx context.Context, m Mode, namespace, key string, fetch func(context.Context) (*llm.ChatResult, error)) (*llm.ChatResult, Outcome, error) {
	m = c.Mode(m)
	if m == Off {
		res, err := fetch(ctx)
		return res, Bypass, err
	}
	if m.Reads() {
		if res, ok := c.Get(ctx, namespace, key); ok {
			return res, Hit, nil
		}
		f, leader := c.Join(namespace, key)
		if !leader {
			if res, ok := f.Wait(ctx); ok {
				return res, Hit, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, Miss, err
			}
			res, err := fetch(ctx)
			if err == nil && m.Writes() {
				c.Put(context.WithoutCancel(ctx), namespace, key, res)
			}
			return res, Miss, err
		}
		var res *llm.ChatResult
		defer func() { f.Land(res) }()
		r, err := fetch(ctx)
		if err != nil {
			return r, Miss, err
		}
		res = r
		if m.Writes() {
			c.Put(context.WithoutCancel(ctx), namespace, key, res)
		}
		return res, Miss, nil
	}
	res, err := fetch(ctx)
	if err == nil {
		c.Put(context.WithoutCancel(ctx), namespace, key, res)
	}
	return res, Miss, err
}

// stored is the encoded form of an answer: what a replay needs, none of
// the call's own metadata (request id, rate limits, attempts).
type stored struct {
	V      int            `json:"v"`
	Result llm.ChatResult `json:"result"`
}

func encode(res *llm.ChatResult) ([]byte, error) {
	r := *res
	r.Meta = llm.ResponseMeta{Provider: res.Meta.Provider, Model: res.Meta.Model, SystemFingerprint: res.Meta.SystemFingerprint, ServiceTier: res.Meta.ServiceTier}
	return json.Marshal(stored{V: 1, Result: r})
}

func decode(v []byte) (*llm.ChatResult, error) {
	var s stored
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	if s.V != 1 {
		return nil, errors.New("cache: unknown entry version")
	}
	return &s.Result, nil
}

// responsesFormat is the Format of an OpenAI Responses reasoning item's
// block (openai.ResponsesFormat): its Signature names the item it preceded,
// no stream sends it, and its encrypted content (Data) is in the result.
const responsesFormat = "openai-responses"

// Replay emits res as a stream's events, in the order a provider streams
// them: reasoning (each signed thinking block's text, then its signature;
// the texts of OpenAI Responses reasoning items parted by a blank line, as
// that format's stream parts them), text, refusal, each tool call (start,
// then its arguments), logprobs, usage, finish. It stops when emit returns
// false. What no event carries (redacted thinking, encrypted reasoning,
// images) is in the result the stream ends with, which a client format's
// encoder reads at the end.
func Replay(res *llm.ChatResult, emit func(llm.Event) bool) bool {
	if len(res.ThinkingBlocks) > 0 {
		// Each signed block as a stream sends it: its text, then its
		// signature on an empty reasoning event.
		reasoned := false
		for _, tb := range res.ThinkingBlocks {
			if tb.Redacted {
				continue // no event carries one: the Result has it
			}
			if tb.Format == responsesFormat {
				if tb.Text == "" {
					continue
				}
				if reasoned && !emit(llm.Event{Type: llm.EventReasoning, Text: "\n\n"}) {
					return false
				}
				reasoned = true
				if !emit(llm.Event{Type: llm.EventReasoning, Text: tb.Text}) {
					return false
				}
				continue
			}
			if tb.Text != "" && !emit(llm.Event{Type: llm.EventReasoning, Text: tb.Text}) {
				return false
			}
			if tb.Signature != "" && !emit(llm.Event{Type: llm.EventReasoning, Signature: tb.Signature}) {
				return false
			}
		}
	} else if res.Reasoning != "" && !emit(llm.Event{Type: llm.EventReasoning, Text: res.Reasoning}) {
		return false
	}
	if res.Content != "" && !emit(llm.Event{Type: llm.EventText, Text: res.Content}) {
		return false
	}
	if res.Refusal != "" && !emit(llm.Event{Type: llm.EventRefusal, Text: res.Refusal}) {
		return false
	}
	for i, tc := range res.ToolCalls {
		if !emit(llm.Event{Type: llm.EventToolCallStart, ToolIndex: i, ToolCallID: tc.ID, ToolName: tc.Name, Signature: tc.Signature}) {
			return false
		}
		if tc.Arguments != "" && !emit(llm.Event{Type: llm.EventToolCallDelta, ToolIndex: i, Text: tc.Arguments}) {
			return false
		}
	}
	if len(res.Logprobs) > 0 && !emit(llm.Event{Type: llm.EventLogprobs, Logprobs: &llm.TokenLogprobs{Tokens: res.Logprobs}}) {
		return false
	}
	u := res.Usage
	if !emit(llm.Event{Type: llm.EventUsage, Usage: &u}) {
		return false
	}
	return emit(llm.Event{Type: llm.EventFinish, Finish: res.FinishReason})
}

// Report is how the cache answered one call, for a caller that reaches
// the cache through layers it does not import (a batch job over a
// Runner): pass one with WithReport; the runtime sets Outcome before the
// call returns (before a stream's first event).
type Report struct {
	Outcome Outcome
}

type reportKey struct{}

// WithReport returns a context whose call's cache outcome is written to
// r.
func WithReport(ctx context.Context, r *Report) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

// ReportOf returns the report passed with WithReport, or nil.
func ReportOf(ctx context.Context) *Report {
	r, _ := ctx.Value(reportKey{}).(*Report)
	return r
}

type modeKey struct{}

// WithMode returns a context whose calls use the cache in mode m rather
// than the cache's default (runtime.WithCacheMode is the same; a layer
// that does not import the runtime, a batch job, uses this one).
func WithMode(ctx context.Context, m Mode) context.Context {
	return context.WithValue(ctx, modeKey{}, m)
}

// ModeOf returns the mode passed with WithMode, or "".
func ModeOf(ctx context.Context) Mode {
	m, _ := ctx.Value(modeKey{}).(Mode)
	return m
}
