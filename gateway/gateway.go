package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/telemetry"
)

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 32 << 20

// Key is one gateway key: what a client presents instead of a provider key.
// Only its SHA-256 is kept.
type Key struct {
	// Name identifies the key in logs and errors; it is not secret.
	Name string
	// SHA256 is the SHA-256 of the key's text (HashKey).
	SHA256 [32]byte
	// Models the key may call: exact names ("openai/gpt-4.1-mini", an
	// alias) or a provider's every model ("openai/*"). Empty: every model.
	Models []string
	// RPM and TPM are requests and tokens per minute for this key (zero:
	// unlimited); Concurrency bounds its calls in flight (zero: unbounded).
	RPM, TPM, Concurrency int
	// BudgetUSD is what the key may spend, in US dollars, per
	// BudgetPeriod (zero: no budget): each answer's cost is charged once
	// the call ends (its batch lines too), from the runtime's prices
	// (runtime.WithPrices), so an answer whose model has no price costs
	// nothing. Without a KeyStore it is counted over the Handler's life,
	// and once spent calls are refused with 429 (insufficient_quota,
	// x-should-retry: false), the call that crosses it not cut short.
	// With a KeyStore each call first reserves its most possible cost
	// (estimate.go) and is refused when the budget cannot cover it: the
	// budget is not overrun.
	BudgetUSD float64
	// BudgetPeriod makes the budget start again every UTC day or month
	// (keystore.Daily, keystore.Monthly); zero: a total.
	BudgetPeriod keystore.Period
	// DropUnsupported is Options.DropUnsupported for this key's requests.
	DropUnsupported bool
}

// HashKey returns the SHA-256 of a key's text, as Key.SHA256 holds it.
func HashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// ParseKeyHash reads "sha256:<64 hex digits>" (or the bare hex) into a hash.
func ParseKeyHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(strings.TrimPrefix(s, "sha256:"))
	if err != nil || len(b) != len(h) {
		return h, errors.New("gateway: a key hash is sha256:<64 hex digits>")
	}
	copy(h[:], b)
	return h, nil
}

// Options configures a Handler. The zero value serves every model to every
// client with no key: mount it on loopback only.
type Options struct {
	// Keys are the gateway keys clients must present. None (and no
	// KeyStore): no authentication (any key, or none, is accepted and
	// ignored). With a KeyStore they seed it: each key whose name the
	// store lacks is created, the others are left as the store has them.
	Keys []Key
	// KeyStore, when set, is where the keys, their limits and budgets and
	// the spend ledger live (fleet.go): keys created, changed, rotated or
	// revoked in it (the console's admin API, chorus keys) hold here
	// within a poll, and every replica on the same store shares each
	// key's limits and budget. Without one, keys are Keys, and limits and
	// spend are counted in this Handler's memory.
	KeyStore *keystore.Store
	// Replica names this process in the KeyStore (default: host, pid and
	// a random suffix). Two live processes must not share one.
	Replica string
	// Logger receives one line per failed request (never a key, never
	// content); nil discards.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// FlushEvents is the most streamed events written per flush when more
	// are already waiting (default 64). It bounds what one stream holds in
	// memory beyond the runtime's stream buffer.
	FlushEvents int
	// Now is the clock of the per-key limits (default time.Now).
	Now func() time.Time

	// FilesDir keeps the files of /v1/files and the state of /v1/batches
	// (default: a temporary directory, made at the first upload and
	// removed by Close). With a directory of its own, a restarted gateway
	// serves the files and batches of the previous one and resumes its
	// running batches where they stopped. With a KeyStore, files and
	// batches live in the store and FilesDir holds local copies (what it
	// held from before the store is moved into it).
	FilesDir string
	// MaxFileBytes caps an uploaded file (default DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxBatchLines caps a batch's requests (default DefaultMaxBatchLines).
	MaxBatchLines int
	// BatchConcurrency is how many lines of one batch run at once live
	// (default 32; the runtime paces them to the providers' limits).
	BatchConcurrency int
	// BatchNative, when set, sends batch lines to the providers' own batch
	// APIs (OpenAI, Anthropic, Gemini) with its Clients (see batch.Native;
	// Cancel is ignored); lines it cannot send run live. Nil: every line
	// runs live.
	BatchNative *batch.Native
	// Batches, when set, publishes each batch job's progress (lines done,
	// rate, ETA, per-model summary, bad lines) to readers in the process,
	// such as the console's Batches page.
	Batches *batch.Registry
	// FanOut names fan-out aliases: a chat completion request for one is
	// sent to each of its models at once and answered with a choice per
	// model (fanout.go). A name may not be a runtime alias. Only POST
	// /v1/chat/completions serves them (400 elsewhere).
	FanOut map[string][]string
	// DefaultProviders names, per client format ("openai", "anthropic",
	// "gemini"), the provider that serves a bare model name (one that is
	// neither provider/model nor an alias) on that format's routes; a
	// format not named uses the provider of its own name, when registered,
	// and one mapped to "" serves no bare name (names.go).
	DefaultProviders map[string]string
	// DropUnsupported sends a request whose fields its upstream's format
	// cannot honour without them, instead of refusing it with a 400
	// naming them (Key.DropUnsupported sets it per key); either way the
	// answer's x-chorus-dropped names what was left out (fields.go).
	DropUnsupported bool
	// CacheShareAcrossKeys puts every key's calls in one namespace of the
	// runtime's response cache (runtime.WithCache), so that a key reads
	// what another's calls stored; by default each key has its own, named
	// for it (cache.go).
	CacheShareAcrossKeys bool
	// Telemetry is where the gateway's HTTP server spans go (nil: the
	// global TracerProvider). Give it the runtime's, so that each server
	// span and the runtime's spans of its call are one trace.
	Telemetry *telemetry.Telemetry
	// RequestLog, when set, receives one record per call, and per request
	// refused before its call (requestlog.go): a *requestlog.Logger writes
	// them off the request's path.
	RequestLog RequestLog
	// LogContent keeps, in each record, the request's body and the
	// answer's text (each cut to LogContentBytes, default
	// DefaultLogContentBytes). Off by default: a record holds no content.
	// Only the body is kept, never a header, so a key sent as one
	// (Authorization, x-api-key, x-goog-api-key) is never in the log.
	LogContent      bool
	LogContentBytes int
	// Console is the path the console is mounted at beside the gateway
	// ("/console/"): a browser opening / is sent there (root.go). Empty:
	// no console.
	Console string
}

// Handler serves the providers' wire formats over a runtime. It is an
// http.Handler: mount it at the root of a server, or under a prefix with
// http.StripPrefix.
type Handler struct {
	rt   *runtime.Runtime
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	keys atomic.Pointer[map[[32]byte]keyEntry]
	// fleet is the link to Options.KeyStore (fleet.go), nil without one.
	fleet *fleet
	// providers are the runtime's provider ids, aliases its aliases
	// (names.go).
	providers map[string]bool
	aliases   map[string][]string

	tracer  trace.Tracer
	files   *fileStore // files.go
	batches batches    // batches.go
	// batchWindow is a batch's completion window: 24h, the only one
	// OpenAI offers (shorter in tests).
	batchWindow time.Duration
}

// New returns a Handler over rt. It does not own rt: closing the runtime
// is the caller's.
func New(rt *runtime.Runtime, opts Options) (*Handler, error) {
	if rt == nil {
		return nil, errors.New("gateway: nil runtime")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.FlushEvents <= 0 {
		opts.FlushEvents = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{rt: rt, opts: opts, log: opts.Logger, mux: http.NewServeMux(), batchWindow: 24 * time.Hour}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	keys := map[[32]byte]keyEntry{}
	names := map[string]bool{}
	for i, k := range opts.Keys {
		if k.SHA256 == ([32]byte{}) {
			return nil, fmt.Errorf("gateway: key %d (%q) has no hash", i, k.Name)
		}
		if k.BudgetUSD < 0 || math.IsNaN(k.BudgetUSD) || math.IsInf(k.BudgetUSD, 0) {
			return nil, fmt.Errorf("gateway: key %q: budget %v is not a finite amount of zero or more", k.Name, k.BudgetUSD)
		}
		if _, err := keystore.ParsePeriod(string(k.BudgetPeriod)); err != nil {
			return nil, fmt.Errorf("gateway: key %q: %w", k.Name, err)
		}
		if _, dup := keys[k.SHA256]; dup || names[k.Name] {
			return nil, fmt.Errorf("gateway: key %q is configured twice", k.Name)
		}
		keys[k.SHA256], names[k.Name] = keyEntry{ks: newKeyState(k)}, true
	}
	if opts.KeyStore != nil {
		keys = map[[32]byte]keyEntry{}
	}
	h.keys.Store(&keys)
	aliases := rt.Aliases()
	h.aliases, h.providers = aliases, map[string]bool{}
	for _, id := range rt.Providers() {
		h.providers[id] = true
	}
	for name, targets := range opts.FanOut {
		if _, clash := aliases[name]; clash || name == "" || len(targets) == 0 {
			return nil, fmt.Errorf("gateway: fan-out %q: want a name that is not a runtime alias, and one model or more", name)
		}
	}
	h.tracer = opts.Telemetry.Tracer()
	if opts.MaxFileBytes <= 0 {
		h.opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxBatchLines <= 0 {
		h.opts.MaxBatchLines = DefaultMaxBatchLines
	}
	var err error
	if h.files, err = openFileStore(opts.FilesDir, h.opts.MaxFileBytes); err != nil {
		return nil, err
	}
	h.batches.jobs = map[string]*batchJob{}
	h.batches.base, h.batches.stop = context.WithCancel(context.Background())
	h.files.st = opts.KeyStore // files on the fleet: fleetfiles.go
	// On the fleet, the store's batches are taken by the agent.
	if opts.FilesDir != "" && opts.KeyStore == nil {
		if err := h.loadBatches(); err != nil {
			h.batches.stop()
			h.batches.wg.Wait()
			return nil, err
		}
	}
	if opts.KeyStore != nil {
		if err := h.openFleet(opts.KeyStore); err != nil { // fleet.go
			h.batches.stop()
			h.batches.wg.Wait()
			return nil, err
		}
		if opts.FilesDir != "" {
			h.importLocal() // fleetfiles.go
		}
	}
	h.routes()
	return h, nil
}

// Close stops the batch jobs and waits for them (until ctx ends): with a
// FilesDir of its own, a new Handler on the same directory resumes them.
// A temporary files directory is removed. Close does not close the
// runtime; call it once no request is being served (after the server's
// Shutdown).
func (h *Handler) Close(ctx context.Context) error {
	h.batches.mu.Lock()
	h.batches.stop()
	h.batches.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.batches.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if h.fleet != nil {
		h.fleet.close(ctx)
	}
	h.files.close()
	return nil
}

// Authenticated reports whether the handler requires gateway keys.
func (h *Handler) Authenticated() bool { return h.opts.KeyStore != nil || len(*h.keys.Load()) > 0 }

// keyMap is the keys by hash (a rotated key's previous hash too).
func (h *Handler) keyMap() map[[32]byte]keyEntry { return *h.keys.Load() }

func (h *Handler) routes() {
	h.mux.HandleFunc("POST /v1/chat/completions", h.logged(h.openAIChat)) // requestlog.go: refusals recorded
	h.mux.HandleFunc("POST /v1/responses", h.logged(h.openAIResponses))
	h.mux.HandleFunc("POST /v1/embeddings", h.logged(h.openAIEmbeddings))
	h.mux.HandleFunc("POST /v1/files", h.uploadFile)
	h.mux.HandleFunc("GET /v1/files", h.listFiles)
	h.mux.HandleFunc("GET /v1/files/{id}", h.getFile)
	h.mux.HandleFunc("DELETE /v1/files/{id}", h.deleteFile)
	h.mux.HandleFunc("GET /v1/files/{id}/content", h.fileContent)
	h.mux.HandleFunc("POST /v1/batches", h.createBatch)
	h.mux.HandleFunc("GET /v1/batches", h.listBatches)
	h.mux.HandleFunc("GET /v1/batches/{id}", h.getBatch)
	h.mux.HandleFunc("POST /v1/batches/{id}/cancel", h.cancelBatch)
	h.mux.HandleFunc("GET /v1/models", h.listModels) // models.go
	h.mux.HandleFunc("GET /v1/models/{id...}", h.getModel)
	h.mux.HandleFunc("GET /v1beta/models", h.geminiModels)
	h.mux.HandleFunc("GET /v1beta/models/{rest...}", h.geminiModels)
	h.mux.HandleFunc("POST /v1/messages", h.logged(h.anthropicMessages))
	h.mux.HandleFunc("POST /v1/messages/count_tokens", h.anthropicCountTokens)
	h.mux.HandleFunc("POST /v1beta/models/{rest...}", h.logged(h.gemini))
	h.rootRoutes() // root.go: /, /version and the 404 of an unknown path
}

// ServeHTTP serves one request, in an HTTP server span (trace.go).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serveTraced(w, h.scoped(r)) }

// presentedKey is the key a client sent, the way its SDK sends it:
// Authorization: Bearer (OpenAI), x-api-key (Anthropic), x-goog-api-key or
// ?key= (Gemini).
func presentedKey(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		if k, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	if v := r.Header.Get("x-api-key"); v != "" {
		return v
	}
	if v := r.Header.Get("x-goog-api-key"); v != "" {
		return v
	}
	return r.URL.Query().Get("key")
}

// authenticate finds the client's key. With no keys configured it answers
// an unlimited anonymous state.
func (h *Handler) authenticate(r *http.Request) (*keyState, *Error) {
	keys := h.keyMap()
	if len(keys) == 0 && h.fleet == nil {
		return nil, nil
	}
	k := presentedKey(r)
	if k == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Message: "missing gateway key (Authorization: Bearer, x-api-key or x-goog-api-key)"}
	}
	// Looked up by its SHA-256: what the lookup's time depends on is the
	// hash of the client's own guess, which tells nothing about a key (a
	// loop of constant-time comparisons cost a comparison per key).
	if e, ok := keys[HashKey(k)]; ok && (e.until.IsZero() || h.opts.Now().Before(e.until)) {
		if e.ks.revoked {
			return nil, errRevoked(e.ks)
		}
		return e.ks, nil
	}
	return nil, &Error{Status: http.StatusUnauthorized, Message: "invalid gateway key"}
}

// writeJSON writes a JSON answer with status 200.
func (h *Handler) writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// writeList writes a page of an OpenAI list (GET /v1/files, GET
// /v1/batches): its items, the ids of its first and last (id reads one),
// and whether more follow.
func writeList[T any](h *Handler, w http.ResponseWriter, page []T, id func(*T) string, more bool) {
	first, last := "", ""
	if len(page) > 0 {
		first, last = id(&page[0]), id(&page[len(page)-1])
	}
	out, err := openai.EncodeServerList(page, first, last, more)
	if err != nil {
		h.fail(w, formatOpenAI, errorFor(err))
		return
	}
	h.writeJSON(w, out)
}

// readBody reads a capped request body. A body whose length is declared
// (and within the cap) is read into a buffer of exactly that size, in one
// allocation; any other is read through http.MaxBytesReader.
func (h *Handler) readBody(r *http.Request) ([]byte, *Error) {
	if n := r.ContentLength; n > 0 && n <= h.opts.MaxBodyBytes {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Message: "reading the request body failed"}
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", h.opts.MaxBodyBytes)}
		}
		return nil, &Error{Status: http.StatusBadRequest, Message: "reading the request body failed"}
	}
	r.ContentLength = int64(len(b)) // what a call's cost is reserved for (estimate.go)
	return b, nil
}
