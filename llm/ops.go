package llm

import (
	"fmt"
	"net/textproto"
	"strings"
	"time"
)

// MaxTranscriptionBytes caps the audio of one transcription request (the
// 25 MB limit of OpenAI's /audio/transcriptions). It is a variable so that
// an application talking to a server with another limit can change it at
// start-up.
var MaxTranscriptionBytes = 25 << 20

// EmbedRequest asks for one embedding vector per input text.
type EmbedRequest struct {
	Model  string
	Inputs []string
	// Dimensions asks for shorter vectors where the model supports it
	// (OpenAI dimensions, Gemini outputDimensionality); zero leaves the
	// model's default.
	Dimensions int
	// Headers are extra HTTP headers for this call; authentication and
	// framing headers are reserved.
	Headers map[string]string
	// Extra are the client's fields llm has no name for (Gemini's taskType
	// and title), sent unchanged to an upstream of their format only; any
	// other format refuses the call (*UnsupportedFieldError), nothing sent.
	Extra *Extra
}

// EmbedResult holds one vector per input, in input order.
type EmbedResult struct {
	Vectors [][]float32
	// Model is the model the provider says served the call, when it says.
	Model string
	// Usage counts input tokens in PromptTokens, where the provider reports
	// them (summed over every batch of a split request).
	Usage Usage
	Meta  ResponseMeta
}

// SpeechRequest asks for spoken audio of Input (text to speech).
type SpeechRequest struct {
	Model string
	Input string
	// Voice names the provider's voice ("alloy", "Kore"); empty leaves the
	// provider's default where it has one.
	Voice string
	// Format is the audio format to ask for ("mp3", "wav", "pcm", ...);
	// empty leaves the provider's default. Audio is never transcoded.
	Format string
	// Instructions steer the delivery (tone, pace, accent), where the
	// provider takes them.
	Instructions string
	// Speed is the playback speed, 0.25 to 4; zero leaves the default.
	Speed   float64
	Headers map[string]string
}

// SpeechResult is the audio exactly as the provider sent it.
type SpeechResult struct {
	Audio []byte
	// MIMEType is the provider's own description of Audio (the
	// Content-Type, or Gemini's inlineData mimeType); empty when it sent
	// none.
	MIMEType string
	Meta     ResponseMeta
}

// TranscriptionFormat is the answer format of a transcription.
type TranscriptionFormat string

// Transcription formats. The zero value asks for TranscriptionJSON.
const (
	TranscriptionText        TranscriptionFormat = "text"
	TranscriptionJSON        TranscriptionFormat = "json"
	TranscriptionVerboseJSON TranscriptionFormat = "verbose_json"
)

// TranscriptionRequest asks for the text of spoken audio (speech to text).
type TranscriptionRequest struct {
	Model string
	// Audio is the whole file, at most MaxTranscriptionBytes.
	Audio []byte
	// Filename is sent as the file's name; providers infer the container
	// from its extension. When empty, one is derived from MIMEType.
	Filename string
	// MIMEType describes Audio ("audio/mpeg", "audio/wav", ...).
	MIMEType string
	// Language is the spoken language as ISO-639-1 ("en"), when known.
	Language string
	// Prompt guides the style or vocabulary of the transcript.
	Prompt string
	Format TranscriptionFormat
	// Temperature is the sampling temperature, 0 to 1; nil leaves the default.
	Temperature *float64
	Headers     map[string]string
}

// Segment is one timed piece of a verbose transcript.
type Segment struct {
	Start, End time.Duration
	Text       string
}

// TranscriptionResult is a transcript. Language, Duration and Segments are
// filled only where the provider reports them (verbose_json).
type TranscriptionResult struct {
	Text     string
	Language string
	Duration time.Duration
	Segments []Segment
	Meta     ResponseMeta
}

// CountTokensResult is a provider's own count of a request's input tokens.
// It is never an estimate: a provider without a counting endpoint answers
// with an *UnsupportedError instead.
type CountTokensResult struct {
	InputTokens int
	Meta        ResponseMeta
}

// ModelInfo describes one model a provider lists. A field the provider does
// not report is zero; nothing is guessed or filled from a static table.
type ModelInfo struct {
	ID          string
	DisplayName string
	Created     time.Time
	// ContextWindow is the input token limit, when reported.
	ContextWindow int
	// MaxOutputTokens is the output token limit, when reported.
	MaxOutputTokens int
	// Capabilities are the provider's own words for what the model does
	// (Gemini supportedGenerationMethods), when reported.
	Capabilities []string
}

// Validate checks the request and returns a *ConfigError naming the first
// field at fault.
func (r *EmbedRequest) Validate() error {
	if r == nil {
		return &ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(r.Model) == "" {
		return &ConfigError{Field: "model", Msg: "is empty"}
	}
	if len(r.Inputs) == 0 {
		return &ConfigError{Field: "inputs", Msg: "is empty"}
	}
	for i, s := range r.Inputs {
		if s == "" {
			return &ConfigError{Field: fmt.Sprintf("inputs[%d]", i), Msg: "is empty"}
		}
	}
	if r.Dimensions < 0 {
		return &ConfigError{Field: "dimensions", Msg: "is negative"}
	}
	return validateHeaders(r.Headers)
}

// Validate checks the request and returns a *ConfigError naming the first
// field at fault.
func (r *SpeechRequest) Validate() error {
	if r == nil {
		return &ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(r.Model) == "" {
		return &ConfigError{Field: "model", Msg: "is empty"}
	}
	if strings.TrimSpace(r.Input) == "" {
		return &ConfigError{Field: "input", Msg: "is empty"}
	}
	if r.Speed != 0 && (r.Speed < 0.25 || r.Speed > 4) {
		return &ConfigError{Field: "speed", Msg: fmt.Sprintf("%v is outside [0.25, 4]", r.Speed)}
	}
	if strings.ContainsAny(r.Format, " /\r\n") {
		return &ConfigError{Field: "format", Msg: fmt.Sprintf("%q is not a format name", r.Format)}
	}
	return validateHeaders(r.Headers)
}

// Validate checks the request and returns a *ConfigError naming the first
// field at fault. Audio above MaxTranscriptionBytes is rejected here, so
// nothing is sent.
func (r *TranscriptionRequest) Validate() error {
	if r == nil {
		return &ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(r.Model) == "" {
		return &ConfigError{Field: "model", Msg: "is empty"}
	}
	if len(r.Audio) == 0 {
		return &ConfigError{Field: "audio", Msg: "is empty"}
	}
	if len(r.Audio) > MaxTranscriptionBytes {
		return &ConfigError{Field: "audio", Msg: fmt.Sprintf("%d bytes exceeds the %d-byte transcription cap", len(r.Audio), MaxTranscriptionBytes)}
	}
	switch r.Format {
	case "", TranscriptionText, TranscriptionJSON, TranscriptionVerboseJSON:
	default:
		return &ConfigError{Field: "format", Msg: fmt.Sprintf("unknown transcription format %q", r.Format)}
	}
	if t := r.Temperature; t != nil && (*t < 0 || *t > 1) {
		return &ConfigError{Field: "temperature", Msg: fmt.Sprintf("%v is outside [0, 1]", *t)}
	}
	if strings.ContainsAny(r.Filename, "\"\r\n/\\") {
		return &ConfigError{Field: "filename", Msg: fmt.Sprintf("%q is not a plain file name", r.Filename)}
	}
	if strings.ContainsAny(r.MIMEType, "\r\n") {
		return &ConfigError{Field: "mime_type", Msg: "is malformed"}
	}
	return validateHeaders(r.Headers)
}

// validateHeaders rejects reserved and malformed per-call headers, naming
// the header but never its value.
func validateHeaders(h map[string]string) error {
	for k, v := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if reservedHeaders[ck] {
			return &ConfigError{Field: "headers", Msg: fmt.Sprintf("%q is reserved", ck)}
		}
		if !validHeaderName(k) || !validHeaderValue(v) {
			return &ConfigError{Field: "headers", Msg: fmt.Sprintf("header %q is malformed", ck)}
		}
	}
	return nil
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue rejects control bytes other than tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
