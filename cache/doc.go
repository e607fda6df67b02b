// Package cache is Chorus's exact response cache: a complete answer is
// stored under a canonical key of what the provider reads, and the same
// request asked again (by the same Go code, another gateway client, a
// batch run again, another replica of a fleet) is answered from the store
// without a call to the provider.
//
//	store, _ := cache.NewMemory(cache.Limits{MaxEntries: 10_000})
//	c, _ := cache.New(store, cache.Options{TTL: time.Hour})
//	rt, _ := runtime.New(runtime.WithProvider(cfg), runtime.WithCache(c, runtime.CacheOptions{}))
//
// The package imports llm only. Stores: NewMemory (bounded, least recently
// used evicted first), cache/sqlitecache (one file) and cache/pgcache
// (PostgreSQL, shared by a fleet, so that single-process users never link
// pgx); all three pass the conformance suite in cache/cachetest.
//
// # The canonical form
//
// Key(target, req) is the hex SHA-256 of Canonical(target, req): a version
// line, the provider/model that serves the call (for an alias, its list of
// targets), and the request as canonical JSON, by these rules (each has a
// test named TestRule...):
//
//  1. Every field of llm.ChatRequest, and of every type it holds, is keyed,
//     except those listed in the package's exclusion list, which never
//     change the answer: Model (replaced by the target), Headers,
//     Metadata, User, SafetyIdentifier, Store, ServiceTier, PromptCache's
//     Key and Retention, and the prompt-cache breakpoints of messages and
//     tools (Message.Cache, Tool.Cache). A field added to llm later is
//     keyed by default (the form is built by reflection), and a test
//     fails until the field is classified.
//  2. Zero values are left out: an unset field, an empty slice and a nil
//     one are the same, so adding a field to llm does not change the key
//     of a request that leaves it unset. A pointer to a struct with
//     nothing keyed set is unset too (&llm.Reasoning{} sends nothing), but
//     a pointer to a zero number is kept: Temperature 0 is not the
//     provider's default.
//  3. Order that the provider reads is kept: messages, parts, tools, tool
//     calls, stop sequences.
//  4. Map keys (LogitBias) are sorted.
//  5. Raw JSON (tool parameters, a response schema, Extra's values) is
//     parsed and written again with object keys sorted and no whitespace:
//     key order and whitespace do not matter; numbers keep their literal
//     text (1 and 1.0 differ), and text that is not JSON is keyed as is.
//  6. Extra's fields are keyed as a set by name: their order in the body
//     does not matter; their format does.
//  7. Inline bytes (images, documents) are keyed by their SHA-256, so a
//     key never holds the content itself; a URL is keyed as its text.
//
// Two requests share an entry exactly when their canonical forms are
// equal. What the client's wire format was (OpenAI, Anthropic, Gemini)
// does not enter: the same request through two formats is one entry, and
// each format replays it in its own shape.
//
// # Entries and scopes
//
// An entry belongs to a namespace: the runtime's (CacheOptions.Namespace),
// a call's (runtime.WithCacheNamespace), the gateway key's name by default,
// so one tenant never reads another's answers unless the configuration
// shares them. An entry is served for Options.TTL after it was written
// (zero: until evicted); a store is capped by Limits (entries, bytes) and
// evicts: the memory store the least recently used entry, the SQL stores
// the oldest written.
//
// Only complete answers are stored: finish stop, length or tool_calls
// (content_filter only with Options.StoreContentFilter), with usage. An
// error, a partial stream, an answer without usage is never stored.
//
// # Modes
//
// A call reads and writes (On), only reads (ReadOnly), only writes
// (WriteOnly: it always asks the provider and refreshes the entry) or
// ignores the cache (Off), TensorZero's names. The default is
// Options.Mode (On).
//
// # In flight, and failures
//
// Identical calls in flight in one process coalesce: the first asks the
// provider, the others wait for its answer (Join, Flight); when the first
// fails, or its answer is not storable, each of the others asks on its
// own. Across a fleet two replicas may both ask; the later write replaces
// the earlier, so an answer is stored once.
//
// A store that fails (Get or Put) never fails the call: the call goes to
// the provider as if there were no cache, and the failure is counted
// (Stats.Errors) and logged through Options.Logger.
package cache
