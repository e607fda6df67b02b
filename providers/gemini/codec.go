package gemini

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/jsonscan"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// DefaultBaseURL is the Gemini API base URL, without a version: request paths
// start with /v1beta.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// providerName names the format in errors the codec builds itself.
const providerName = "gemini"

// formatName is the Format of the ThinkingBlocks this codec produces and the
// only Format it replays.
const formatName = "gemini"

// Codec is the Gemini generateContent wire format. The zero value is ready
// to use.
type Codec struct{}

var _ wire.Codec = Codec{}

// Format returns "gemini".
func (Codec) Format() string { return formatName }

// Authorize sets the x-goog-api-key header.
func (Codec) Authorize(h http.Header, key string, _ wire.Quirks) {
	h.Set("X-Goog-Api-Key", key)
}

// NewStreamDecoder returns a decoder for one streamed generateContent answer.
// It takes one GenerateContentResponse per Feed: the data of an alt=sse
// event, or one element of a JSON-array stream.
func (Codec) NewStreamDecoder() wire.StreamDecoder { return &decoder{} }

// ParseChat parses a buffered generateContent answer. A JSON array of
// responses (streamGenerateContent without alt=sse) is accepted too and
// folded in order. An {"error":{...}} body is returned as *llm.APIError,
// malformed JSON as *llm.DecodeError.
func (Codec) ParseChat(body []byte) (*llm.ChatResult, error) {
	d := &decoder{}
	d.text.exact = true
	emit := func(llm.Event) bool { return true }
	if isArray(body) {
		arr := jsonscan.NewArray(body)
		for arr.Next() {
			if _, err := d.Feed(nil, arr.Value(), emit); err != nil {
				return nil, err
			}
		}
		if err := arr.Err(); err != nil {
			return nil, decodeError("response array", err)
		}
		return d.Result(), nil
	}
	if isBlank(body) {
		return nil, decodeError("response", errEmptyBody)
	}
	if _, err := d.Feed(nil, body, emit); err != nil {
		return nil, err
	}
	return d.Result(), nil
}

// ParseError reads Google's error envelope
// {"error":{"code":429,"message":...,"status":"RESOURCE_EXHAUSTED","details":[...]}}:
// Type and Code are the status, Message the message. The envelope may also
// arrive as the first element of a JSON array (streamGenerateContent without
// alt=sse). Any other shape gives a zero ErrorInfo.
func (Codec) ParseError(_ int, body []byte) wire.ErrorInfo {
	e, ok := readErrorEnvelope(body)
	if !ok {
		return wire.ErrorInfo{}
	}
	return wire.ErrorInfo{Type: e.status, Code: e.status, Message: e.message, Quota: quotaVerdict(body)}
}

// QuotaID returns the quota id of a Google error body's QuotaFailure detail
// (its first violation's), "" when it has none.
func QuotaID(body []byte) string {
	errObj := errorObject(body)
	if errObj == nil {
		return ""
	}
	details := jsonscan.NewArray(jsonscan.Get(errObj, "details"))
	for details.Next() {
		d := details.Value()
		t, _ := jsonscan.RawString(jsonscan.Get(d, "@type"))
		if !strings.HasSuffix(string(t), "google.rpc.QuotaFailure") {
			continue
		}
		vs := jsonscan.NewArray(jsonscan.Get(d, "violations"))
		for vs.Next() {
			if id, err := jsonscan.String(jsonscan.Get(vs.Value(), "quotaId")); err == nil && id != "" {
				return id
			}
		}
	}
	return ""
}

// quotaVerdict reads what a RESOURCE_EXHAUSTED means from its details, not
// from its message (Gemini's per-minute 429 also says "You exceeded your
// current quota"): a RetryInfo, or a QuotaFailure whose quota ids are
// per-minute (or per-second), is pacing; a per-day quota id without a
// RetryInfo is exhausted. Neither detail: unknown.
func quotaVerdict(body []byte) wire.QuotaVerdict {
	errObj := errorObject(body)
	if errObj == nil {
		return wire.QuotaUnknown
	}
	retryInfo, perDay, perShort := false, false, false
	details := jsonscan.NewArray(jsonscan.Get(errObj, "details"))
	for details.Next() {
		d := details.Value()
		t, _ := jsonscan.RawString(jsonscan.Get(d, "@type"))
		switch {
		case strings.HasSuffix(string(t), "google.rpc.RetryInfo"):
			retryInfo = true
		case strings.HasSuffix(string(t), "google.rpc.QuotaFailure"):
			vs := jsonscan.NewArray(jsonscan.Get(d, "violations"))
			for vs.Next() {
				id, _ := jsonscan.RawString(jsonscan.Get(vs.Value(), "quotaId"))
				switch q := strings.ToLower(string(id)); {
				case strings.Contains(q, "perday"):
					perDay = true
				case strings.Contains(q, "perminute"), strings.Contains(q, "persecond"):
					perShort = true
				}
			}
		}
	}
	switch {
	case retryInfo || perShort:
		return wire.QuotaPacing
	case perDay:
		return wire.QuotaExhausted
	}
	return wire.QuotaUnknown
}

// RetryDelay returns the retry hint of a Google error body: the retryDelay of
// its google.rpc.RetryInfo detail ("12s", "0.5s", or the {seconds, nanos}
// object form). It returns 0 when the body has none or it cannot be parsed.
func RetryDelay(body []byte) time.Duration {
	errObj := errorObject(body)
	if errObj == nil {
		return 0
	}
	details := jsonscan.NewArray(jsonscan.Get(errObj, "details"))
	for details.Next() {
		d := details.Value()
		t, ok := jsonscan.RawString(jsonscan.Get(d, "@type"))
		if !ok || !strings.HasSuffix(string(t), "google.rpc.RetryInfo") {
			continue
		}
		return parseProtoDuration(jsonscan.Get(d, "retryDelay"))
	}
	return 0
}

// parseProtoDuration reads a google.protobuf.Duration in its JSON string
// form ("1.5s") or object form ({"seconds":"1","nanos":500000000}).
func parseProtoDuration(v []byte) time.Duration {
	if s, ok := jsonscan.RawString(v); ok {
		str := string(s)
		if !strings.HasSuffix(str, "s") {
			return 0
		}
		d, err := time.ParseDuration(str)
		if err != nil || d < 0 {
			return 0
		}
		return d
	}
	o := jsonscan.NewObject(v)
	var secs, nanos int64
	found := false
	for o.Next() {
		switch string(o.Key()) {
		case "seconds":
			n, ok := intValue(o.Value())
			if !ok {
				return 0
			}
			secs, found = int64(n), true
		case "nanos":
			n, ok := intValue(o.Value())
			if !ok {
				return 0
			}
			nanos, found = int64(n), true
		}
	}
	if !found || o.Err() != nil {
		return 0
	}
	d := time.Duration(secs)*time.Second + time.Duration(nanos)
	if d < 0 {
		return 0
	}
	return d
}

// intValue reads a JSON number or a JSON string holding an integer (proto3
// JSON encodes int64 as a string).
func intValue(v []byte) (int, bool) {
	if s, ok := jsonscan.RawString(v); ok {
		n, err := strconv.Atoi(string(s))
		return n, err == nil
	}
	n, err := jsonscan.Int(v)
	return n, err == nil
}

// errorEnvelope is the part of a Google error body Chorus reads.
type errorEnvelope struct {
	code    int
	status  string
	message string
}

// errorObject returns the raw "error" object of body, looking into the first
// element when body is an array; nil when there is none.
func errorObject(body []byte) []byte {
	if isArray(body) {
		arr := jsonscan.NewArray(body)
		if !arr.Next() {
			return nil
		}
		body = arr.Value()
	}
	v := jsonscan.Get(body, "error")
	if jsonscan.IsNull(v) {
		return nil
	}
	return v
}

func readErrorEnvelope(body []byte) (errorEnvelope, bool) {
	v := errorObject(body)
	if v == nil {
		return errorEnvelope{}, false
	}
	return parseErrorObject(v)
}

// parseErrorObject reads {"code","message","status"} from an error object.
func parseErrorObject(v []byte) (errorEnvelope, bool) {
	var e errorEnvelope
	o := jsonscan.NewObject(v)
	ok := false
	for o.Next() {
		switch string(o.Key()) {
		case "code":
			if n, good := intValue(o.Value()); good {
				e.code, ok = n, true
			}
		case "status":
			if jsonscan.IsString(o.Value()) {
				s, err := jsonscan.String(o.Value())
				if err == nil {
					e.status, ok = s, true
				}
			}
		case "message":
			s, err := jsonscan.String(o.Value())
			if err == nil {
				e.message, ok = s, true
			}
		}
	}
	if o.Err() != nil {
		return errorEnvelope{}, false
	}
	return e, ok
}

// apiError turns an error envelope met inside a 200 answer (a stream chunk
// or a buffered body) into an *llm.APIError. Status stays 0 (the HTTP status
// was 200); Type and Code are Google's status, or the numeric code when the
// status is missing.
func apiError(e errorEnvelope) *llm.APIError {
	ae := &llm.APIError{
		Provider: providerName,
		Type:     e.status,
		Code:     e.status,
		Message:  e.message,
	}
	if ae.Code == "" && e.code != 0 {
		ae.Code = strconv.Itoa(e.code)
	}
	switch e.status {
	case "UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL":
		ae.Retryable = true
	}
	switch e.code {
	case 429, 500, 503:
		ae.Retryable = true
	}
	return ae
}

// finishNames maps the legacy integer encoding of Candidate.FinishReason
// (enum-encoding=int, as langchaingo's traces use) to its names. The numbers
// are those of google.ai.generativelanguage.v1beta.Candidate.FinishReason,
// the API this codec talks to (Vertex AI numbers some of them differently).
var finishNames = [...]string{
	0:  "FINISH_REASON_UNSPECIFIED",
	1:  "STOP",
	2:  "MAX_TOKENS",
	3:  "SAFETY",
	4:  "RECITATION",
	5:  "OTHER",
	6:  "LANGUAGE",
	7:  "BLOCKLIST",
	8:  "PROHIBITED_CONTENT",
	9:  "SPII",
	10: "MALFORMED_FUNCTION_CALL",
	11: "IMAGE_SAFETY",
}

// finishFromName maps a Gemini finish reason name to the canonical reasons.
// Reasons with no canonical meaning (OTHER, LANGUAGE,
// MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, ...) map to "".
func finishFromName(s string) llm.FinishReason {
	switch s {
	case "STOP":
		return llm.FinishStop
	case "MAX_TOKENS":
		return llm.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return llm.FinishContentFilter
	}
	return llm.FinishUnknown
}

// finishFromRaw maps a raw finishReason value (a string, or an integer in the
// legacy encoding). seen is false when the value is absent, null or
// unspecified: the candidate has not finished.
func finishFromRaw(v []byte) (r llm.FinishReason, seen bool) {
	if jsonscan.IsNull(v) {
		return llm.FinishUnknown, false
	}
	if s, ok := jsonscan.RawString(v); ok {
		if len(s) == 0 || string(s) == "FINISH_REASON_UNSPECIFIED" {
			return llm.FinishUnknown, false
		}
		return finishFromName(string(s)), true
	}
	n, err := jsonscan.Int(v)
	if err != nil || n == 0 {
		return llm.FinishUnknown, false
	}
	if n > 0 && n < len(finishNames) {
		return finishFromName(finishNames[n]), true
	}
	return llm.FinishUnknown, true
}

// blocked reports whether a promptFeedback.blockReason value names a block
// (a name other than BLOCK_REASON_UNSPECIFIED, or a non-zero integer).
func blocked(v []byte) bool {
	if jsonscan.IsNull(v) {
		return false
	}
	if s, ok := jsonscan.RawString(v); ok {
		return len(s) > 0 && string(s) != "BLOCK_REASON_UNSPECIFIED"
	}
	n, err := jsonscan.Int(v)
	return err == nil && n != 0
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

func isArray(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\n', '\r', '\t':
			continue
		case '[':
			return true
		}
		return false
	}
	return false
}
