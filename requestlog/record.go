package requestlog

import "time"

// Record is one answered call, or one request refused before its call.
// It never holds a key, and holds content (RequestBody, Answer) only when
// the operator turned that on (gateway.Options.LogContent).
type Record struct {
	// ID is the store's id, set when read back (zero when logging).
	ID int64 `json:"id"`
	// Time is when the request arrived.
	Time time.Time `json:"time"`
	// KeyFingerprint names the gateway key (a short hash, never the key);
	// KeyName is its configured name. Both empty without keys.
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
	KeyName        string `json:"key_name,omitempty"`
	// Route is the gateway route that answered ("POST /v1/chat/completions")
	// and Format the client's wire format ("openai", "anthropic", "gemini").
	Route  string `json:"route"`
	Format string `json:"format"`
	// Requested is the model or alias the client asked for; Model and
	// Provider are what served it (or was tried last, for a failed call).
	Requested string `json:"requested"`
	Model     string `json:"model,omitempty"`
	Provider  string `json:"provider,omitempty"`
	// Step is the fallback step that served; Attempts counts placements.
	Step     int `json:"step"`
	Attempts int `json:"attempts"`
	// Stream is whether the answer was streamed.
	Stream bool `json:"stream"`
	// Status is the HTTP status the client was answered with; ErrorType
	// names the kind of a failure ("rate_limit", "timeout", "upstream",
	// ...), empty for a success.
	Status    int    `json:"status"`
	ErrorType string `json:"error_type,omitempty"`
	// Queue is the wait for admission, TTFT the time to the first streamed
	// event (zero for a buffered answer), Latency the whole call.
	Queue   time.Duration `json:"queue_ns"`
	TTFT    time.Duration `json:"ttft_ns"`
	Latency time.Duration `json:"latency_ns"`
	// InputTokens is all input (uncached, cache reads and writes),
	// CachedTokens the cache reads among it, OutputTokens all output.
	InputTokens  int `json:"input_tokens"`
	CachedTokens int `json:"cached_tokens"`
	OutputTokens int `json:"output_tokens"`
	// Cost is what the client was told the answer cost, in US dollars.
	Cost float64 `json:"cost_usd"`
	// CacheHit is whether the gateway's response cache answered.
	CacheHit bool `json:"cache_hit"`
	// BatchID and LineID name a batch line (empty otherwise).
	BatchID string `json:"batch_id,omitempty"`
	LineID  string `json:"line_id,omitempty"`
	// TraceID is the request's trace, when tracing is on.
	TraceID string `json:"trace_id,omitempty"`
	// RequestBody is the request's body and Answer the answer's text, each
	// cut to a size: empty unless content logging is on.
	RequestBody string `json:"request_body,omitempty"`
	Answer      string `json:"answer,omitempty"`
}

// Failed reports whether the call failed.
func (r *Record) Failed() bool { return r.ErrorType != "" || r.Status >= 400 }
