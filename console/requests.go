package console

import (
	"encoding/csv"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// The request log's API (Options.RequestLog):
//
//	GET /api/console/requests  key, model, provider, status, from, to, cursor, limit
//	GET /api/console/usage     key, model, provider, status, from, to, group_by, bucket
//
// Both answer JSON, or CSV with format=csv. A page of requests is newest
// first; its "next" is the cursor of the following page. A filter the log
// cannot read is a 400 whose code is bad_filter and whose "filter" names
// it. Without a request log both are 404 (no_request_log).

// RequestsBody is the answer of GET /api/console/requests.
type RequestsBody struct {
	Records []requestlog.Record `json:"records"`
	Next    string              `json:"next,omitempty"`
	// Log is the logger's counts: Dropped is what could not be written.
	Log requestlog.Stats `json:"log"`
}

// UsageBody is the answer of GET /api/console/usage.
type UsageBody struct {
	Rows []requestlog.UsageRow `json:"rows"`
	Log  requestlog.Stats      `json:"log"`
}

// FilterErrorBody is the 400 of a bad filter.
type FilterErrorBody struct {
	Error  ErrorInfo `json:"error"`
	Filter string    `json:"filter"`
}

// csvFormat reads format= (json or csv) and removes it from the query.
func csvFormat(w http.ResponseWriter, r *http.Request) (csvOut, ok bool) {
	q := r.URL.Query()
	switch f := q.Get("format"); f {
	case "", "json":
	case "csv":
		csvOut = true
	default:
		writeJSON(w, http.StatusBadRequest, FilterErrorBody{Error: ErrorInfo{Code: "bad_filter", Message: "format " + strconv.Quote(f) + ": want json or csv"}, Filter: "format"})
		return false, false
	}
	return csvOut, true
}

func (h *Handler) requestLogErr(w http.ResponseWriter, err error) {
	var fe *requestlog.FilterError
	if errors.As(err, &fe) {
		writeJSON(w, http.StatusBadRequest, FilterErrorBody{Error: ErrorInfo{Code: "bad_filter", Message: fe.Error()}, Filter: fe.Name})
		return
	}
	h.log.Warn("console: request log read failed", "error", err.Error())
	writeError(w, http.StatusInternalServerError, "request_log", err.Error())
}

func (h *Handler) apiRequests(w http.ResponseWriter, r *http.Request) {
	lg := h.opt.RequestLog
	if lg == nil {
		writeError(w, http.StatusNotFound, "no_request_log", "this console has no request log")
		return
	}
	csvOut, ok := csvFormat(w, r)
	if !ok {
		return
	}
	q, err := requestlog.ParseQuery(r.URL.Query())
	if err != nil {
		h.requestLogErr(w, err)
		return
	}
	p, err := lg.Store().List(r.Context(), q)
	if err != nil {
		h.requestLogErr(w, err)
		return
	}
	if !csvOut {
		writeJSON(w, http.StatusOK, RequestsBody{Records: p.Records, Next: p.Next, Log: lg.Stats()})
		return
	}
	if p.Next != "" {
		w.Header().Set("X-Next-Cursor", p.Next)
	}
	cw := startCSV(w, "requests.csv", "id", "time", "key_fingerprint", "key_name", "route", "format", "requested", "model", "provider",
		"step", "attempts", "stream", "status", "error_type", "queue_ms", "ttft_ms", "latency_ms",
		"input_tokens", "cached_tokens", "output_tokens", "cost_usd", "cache_hit", "batch_id", "line_id", "trace_id")
	for _, x := range p.Records {
		_ = cw.Write([]string{strconv.FormatInt(x.ID, 10), x.Time.Format(time.RFC3339Nano), x.KeyFingerprint, x.KeyName, x.Route, x.Format, x.Requested, x.Model, x.Provider,
			strconv.Itoa(x.Step), strconv.Itoa(x.Attempts), strconv.FormatBool(x.Stream), strconv.Itoa(x.Status), x.ErrorType, ms(x.Queue), ms(x.TTFT), ms(x.Latency),
			strconv.Itoa(x.InputTokens), strconv.Itoa(x.CachedTokens), strconv.Itoa(x.OutputTokens), strconv.FormatFloat(x.Cost, 'f', -1, 64), strconv.FormatBool(x.CacheHit), x.BatchID, x.LineID, x.TraceID})
	}
	cw.Flush()
}

func (h *Handler) apiUsage(w http.ResponseWriter, r *http.Request) {
	lg := h.opt.RequestLog
	if lg == nil {
		writeError(w, http.StatusNotFound, "no_request_log", "this console has no request log")
		return
	}
	csvOut, ok := csvFormat(w, r)
	if !ok {
		return
	}
	q, err := requestlog.ParseUsage(r.URL.Query())
	if err != nil {
		h.requestLogErr(w, err)
		return
	}
	rows, err := lg.Store().Usage(r.Context(), q)
	if err != nil {
		h.requestLogErr(w, err)
		return
	}
	if !csvOut {
		writeJSON(w, http.StatusOK, UsageBody{Rows: rows, Log: lg.Stats()})
		return
	}
	cw := startCSV(w, "usage.csv", UsageCSVHeader...)
	for _, x := range rows {
		_ = cw.Write(UsageCSVRow(x))
	}
	cw.Flush()
}

// UsageCSVHeader and UsageCSVRow are the CSV of a usage answer (chorus
// usage prints the same).
var UsageCSVHeader = []string{"bucket", "group", "requests", "errors", "input_tokens", "cached_tokens", "output_tokens", "cost_usd",
	"latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms"}

// UsageCSVRow is one usage row as UsageCSVHeader names its columns.
func UsageCSVRow(x requestlog.UsageRow) []string {
	b := ""
	if !x.Bucket.IsZero() {
		b = x.Bucket.Format(time.RFC3339)
	}
	return []string{b, x.Group, strconv.FormatInt(x.Requests, 10), strconv.FormatInt(x.Errors, 10),
		strconv.FormatInt(x.InputTokens, 10), strconv.FormatInt(x.CachedTokens, 10), strconv.FormatInt(x.OutputTokens, 10), strconv.FormatFloat(x.Cost, 'f', 6, 64),
		ms(x.LatencyP50), ms(x.LatencyP95), ms(x.LatencyP99), ms(x.TTFTP50), ms(x.TTFTP95), ms(x.TTFTP99)}
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)
}

func startCSV(w http.ResponseWriter, name string, header ...string) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write(header)
	return cw
}
