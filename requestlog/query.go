package requestlog

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FilterError names a filter or parameter that cannot be read.
type FilterError struct {
	Name, Value, Reason string
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("requestlog: filter %s=%q: %s", e.Name, e.Value, e.Reason)
}

// Filter selects records. Zero fields select everything.
type Filter struct {
	// Key is a key fingerprint or name.
	Key string
	// Model is the model that served (provider/model).
	Model    string
	Provider string
	// Status is "ok", "error", an HTTP status ("429") or an error type
	// ("rate_limit").
	Status string
	// From and To bound Time: From <= Time < To.
	From, To time.Time
}

// Query asks for one page of records, newest first.
type Query struct {
	Filter
	// Cursor is the Next of the previous page ("" for the first).
	Cursor string
	// Limit is the page's size (default 50, at most 1000).
	Limit int
}

// Page is one page of records; Next, when not empty, continues it.
type Page struct {
	Records []Record `json:"records"`
	Next    string   `json:"next,omitempty"`
}

// Bucket widths of Usage.
const (
	Hour = time.Hour
	Day  = 24 * time.Hour
)

// UsageQuery asks for aggregates.
type UsageQuery struct {
	Filter
	// GroupBy is "key", "model", "provider" or "" (everything together).
	GroupBy string
	// Bucket is Hour, Day or zero (the whole range in one bucket).
	Bucket time.Duration
}

// UsageRow aggregates the records of one group in one bucket.
type UsageRow struct {
	// Bucket is the bucket's start (UTC); zero without buckets.
	Bucket time.Time `json:"bucket"`
	// Group is the key (name, or fingerprint for a key with no name), model
	// or provider; empty without GroupBy.
	Group        string           `json:"group"`
	Requests     int64            `json:"requests"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind,omitempty"`
	InputTokens  int64            `json:"input_tokens"`
	CachedTokens int64            `json:"cached_tokens"`
	OutputTokens int64            `json:"output_tokens"`
	Cost         float64          `json:"cost_usd"`
	// Latency and TTFT percentiles (nearest rank). TTFT is over streamed
	// answers only.
	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP95 time.Duration `json:"latency_p95_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns"`
	TTFTP50    time.Duration `json:"ttft_p50_ns"`
	TTFTP95    time.Duration `json:"ttft_p95_ns"`
	TTFTP99    time.Duration `json:"ttft_p99_ns"`
}

// MaxBuckets bounds the buckets of one Usage answer: a wider range is a
// *FilterError naming "from" (ask for a narrower one, or a wider bucket).
const MaxBuckets = 24 * 400

var (
	listParams  = []string{"key", "model", "provider", "status", "from", "to", "cursor", "limit", "format"}
	usageParams = []string{"key", "model", "provider", "status", "from", "to", "group_by", "bucket", "format"}
)

// ParseQuery reads a Query from URL parameters: key, model, provider,
// status, from and to (RFC 3339), cursor, limit ("format" is left to the
// caller). An unknown parameter or a bad value is a *FilterError naming it.
func ParseQuery(v url.Values) (Query, error) {
	var q Query
	if err := unknown(v, listParams); err != nil {
		return q, err
	}
	f, err := parseFilter(v)
	if err != nil {
		return q, err
	}
	q.Filter, q.Cursor = f, v.Get("cursor")
	if q.Cursor != "" {
		if _, _, err := decodeCursor(q.Cursor); err != nil {
			return q, err
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, &FilterError{"limit", s, "want a whole number from 1 to 1000"}
		}
		q.Limit = n
	}
	return q, nil
}

// ParseUsage reads a UsageQuery from URL parameters: the filters of
// ParseQuery, group_by (key, model, provider) and bucket (hour, day).
func ParseUsage(v url.Values) (UsageQuery, error) {
	var q UsageQuery
	if err := unknown(v, usageParams); err != nil {
		return q, err
	}
	f, err := parseFilter(v)
	if err != nil {
		return q, err
	}
	q.Filter, q.GroupBy = f, v.Get("group_by")
	switch b := v.Get("bucket"); b {
	case "":
	case "hour":
		q.Bucket = Hour
	case "day":
		q.Bucket = Day
	default:
		return q, &FilterError{"bucket", b, "want hour or day"}
	}
	return q, q.check()
}

func unknown(v url.Values, known []string) error {
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			return &FilterError{k, v.Get(k), "unknown filter (known: " + strings.Join(known, ", ") + ")"}
		}
		if len(v[k]) > 1 {
			return &FilterError{k, strings.Join(v[k], ","), "given more than once"}
		}
	}
	return nil
}

func parseFilter(v url.Values) (Filter, error) {
	f := Filter{Key: v.Get("key"), Model: v.Get("model"), Provider: v.Get("provider"), Status: v.Get("status")}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return f, &FilterError{p.name, s, "want an RFC 3339 time (2026-01-02T15:04:05Z)"}
		}
		*p.t = t
	}
	return f, f.check()
}

// check validates a Filter built in Go as ParseQuery does.
func (f Filter) check() error {
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return &FilterError{"from", f.From.Format(time.RFC3339Nano), "from must be before to (" + f.To.Format(time.RFC3339Nano) + ")"}
	}
	if _, _, err := statusCond(f.Status); err != nil {
		return err
	}
	return nil
}

func (q UsageQuery) check() error {
	if err := q.Filter.check(); err != nil {
		return err
	}
	switch q.GroupBy {
	case "", "key", "model", "provider":
	default:
		return &FilterError{"group_by", q.GroupBy, "want key, model or provider"}
	}
	switch q.Bucket {
	case 0, Hour, Day:
	default:
		return &FilterError{"bucket", q.Bucket.String(), "want hour or day"}
	}
	if q.Bucket != 0 {
		if q.From.IsZero() || q.To.IsZero() {
			return &FilterError{"from", "", "buckets need from and to"}
		}
		if n := q.To.Sub(q.From) / q.Bucket; n > MaxBuckets {
			return &FilterError{"from", q.From.Format(time.RFC3339), fmt.Sprintf("the range holds %d buckets, more than %d: narrow it or widen the bucket", n, MaxBuckets)}
		}
	}
	return nil
}

// statusCond is the SQL condition of a status filter and its argument.
func statusCond(s string) (string, any, error) {
	switch s {
	case "":
		return "", nil, nil
	case "ok":
		return "error_type = ''", nil, nil
	case "error":
		return "error_type <> ''", nil, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 100 || n > 599 {
			return "", nil, &FilterError{"status", s, "an HTTP status is from 100 to 599"}
		}
		return "status = ?", n, nil
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return "", nil, &FilterError{"status", s, "want ok, error, an HTTP status or an error type"}
		}
	}
	return "error_type = ?", s, nil
}

// A cursor is the (time, id) of the last record of a page.
func encodeCursor(t int64, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t, 36) + "." + strconv.FormatInt(id, 36)))
}

func decodeCursor(c string) (int64, int64, error) {
	bad := &FilterError{"cursor", c, "not a cursor this log gave"}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, 0, bad
	}
	ts, ids, ok := strings.Cut(string(b), ".")
	if !ok {
		return 0, 0, bad
	}
	t, err1 := strconv.ParseInt(ts, 36, 64)
	id, err2 := strconv.ParseInt(ids, 36, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, bad
	}
	return t, id, nil
}
