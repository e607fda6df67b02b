package runtime

import (
	"log/slog"
	"strings"
	"time"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/internal/actorkit"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// Limits are static limits for each credential of a provider, known before
// any response (for example from the provider's dashboard). Zero fields are
// learned from response headers (rates) or unlimited (MaxConcurrency).
type Limits = actors.Limits

type options struct {
	system         *actorkit.System // a cluster node's; nil: the process's shared one
	budget         SharedBudget
	configs        []providers.Config
	aliases        map[string][]string
	routes         map[string]Route // WithRoutedAlias (routing.go)
	patterns       []modelPattern   // WithModelPattern (names.go)
	limits         map[string]Limits
	maxConcurrency int
	queueSize      int
	logger         *slog.Logger
	clientOpts     []providers.Option
	streamBuffer   int
	placements     int
	timeout        time.Duration
	prices         llm.Prices           // WithPrices (cost.go)
	tel            *telemetry.Telemetry // WithTelemetry (telemetry.go)
	cache          *cacheHook           // WithCache (cache.go)
	err            error
}

// WithTimeout sets the whole-call budget of every runtime call: admission
// queueing, cooldown waits, every attempt and fallback, and for a stream the
// stream itself (default providers.DefaultTimeout; zero or negative: none
// beyond the caller's context). The credential clients keep their own
// budget too; the shorter wins.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Option configures a Runtime.
type Option func(*options)

// WithProvider registers one provider credential. Several configs with the
// same ID are several credentials (keys) behind one provider.
func WithProvider(cfg providers.Config) Option {
	return func(o *options) { o.configs = append(o.configs, cfg) }
}

// FromEnv registers every credential found in the environment (see
// providers.FromEnv: one per key of a comma-separated variable).
func FromEnv() Option {
	return func(o *options) { o.configs = append(o.configs, providers.FromEnv()...) }
}

// WithAlias names an ordered fallback list of models: a call to name tries
// targets[0], then the next on a retryable failure before the first event or
// when every credential of a model cools down past the caller's budget.
func WithAlias(name string, targets ...string) Option {
	return func(o *options) {
		if name == "" || strings.Contains(name, "/") || len(targets) == 0 {
			o.err = &llm.ConfigError{Field: "alias", Msg: "an alias needs a name without '/' and at least one provider/model target"}
			return
		}
		if o.aliases == nil {
			o.aliases = map[string][]string{}
		}
		o.aliases[name] = append([]string(nil), targets...)
		delete(o.routes, name) // a plain alias replaces a routed one of its name
	}
}

// WithLimits sets static limits for every credential of provider id.
func WithLimits(id string, l Limits) Option {
	return func(o *options) {
		if o.limits == nil {
			o.limits = map[string]Limits{}
		}
		o.limits[id] = l
	}
}

// WithMaxConcurrency caps requests in flight per credential (default: no
// cap beyond the learned limits). WithLimits overrides it per provider.
func WithMaxConcurrency(n int) Option { return func(o *options) { o.maxConcurrency = n } }

// WithQueueSize bounds each credential's admission queue (default 1024).
// A caller arriving at a full queue gets llm.ErrOverloaded at once.
func WithQueueSize(n int) Option { return func(o *options) { o.queueSize = n } }

// WithLogger routes Chorus's and Proto.Actor's log lines to l. The default
// is silent.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClientOptions passes options to every credential's providers.Client
// (timeouts, retry policy, HTTP client, observers).
func WithClientOptions(opts ...providers.Option) Option {
	return func(o *options) { o.clientOpts = append(o.clientOpts, opts...) }
}

// Credential describes one provider credential to a SharedBudget. KeyID
// identifies the key without revealing it: the first 16 hex digits of the
// SHA-256 of the key, the same on every process that holds the key.
// Learned is the learn-once state of the credential's endpoint in this
// runtime, shared by the endpoint's credentials: a SharedBudget may carry
// lessons between it and other runtimes (cluster does).
type Credential struct {
	Provider  string
	Index     int
	KeyID     string
	Limits    Limits
	QueueSize int
	Learned   *providers.Learned
	// Peers is how many keys serve the credential's endpoint in this
	// runtime: if the provider's reports then show others drawing on the
	// key's budget, its budget paces at 1/Peers of what they report
	// (actors.CredentialState.ShareEndpoint). Not set for a limit declared
	// shared, whose one budget serves them all.
	Peers int
}

// A SharedBudget supplies the admission authority of a credential in place
// of the runtime's own credential actor, so that several runtimes using
// one key never exceed its limits together. cluster supplies one
// that asks the credential's budget owner in the cluster.
type SharedBudget func(Credential) (actors.Admitter, error)

// WithSharedBudget makes every credential's admissions go through b.
func WithSharedBudget(b SharedBudget) Option { return func(o *options) { o.budget = b } }

// WithStreamBuffer sets the capacity of each stream's event channel
// (default 64).
func WithStreamBuffer(n int) Option { return func(o *options) { o.streamBuffer = n } }
