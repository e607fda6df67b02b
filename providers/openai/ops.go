package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// Paths of the non-chat operations, relative to a base URL that carries the
// API version.
const (
	embeddingsPath     = "/embeddings"
	speechPath         = "/audio/speech"
	transcriptionsPath = "/audio/transcriptions"
	modelsPath         = "/models"
)

// EmbedBatchSize is the most inputs one /embeddings request carries
// (OpenAI's limit is 2048). Package providers splits larger requests into
// batches of this size and reassembles the vectors in input order. It is a
// variable so that a gateway with a lower limit can be served.
var EmbedBatchSize = 2048

type embedBody struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

// EmbedRequest builds POST /embeddings for every input of req, asking for
// base64 vectors (a third of the bytes of JSON floats). Errors are
// *llm.ConfigError.
func EmbedRequest(req *llm.EmbedRequest, o wire.BuildOptions) (*wire.Request, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	body, err := encodeJSON(embedBody{Model: req.Model, Input: req.Inputs, EncodingFormat: "base64", Dimensions: req.Dimensions})
	if err != nil {
		return nil, err
	}
	body = wire.SpliceExtra(body, req.Extra, formatName)
	return &wire.Request{Method: http.MethodPost, Path: embeddingsPath, Body: body, Header: jsonHeader("application/json", req.Headers)}, nil
}

type embedResponse struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// ParseEmbed parses an /embeddings answer. Each embedding may be a base64
// string of little-endian float32 values (encoding_format base64) or an
// array of numbers (servers that ignore encoding_format); vectors are put
// in the order of their index. An error object without data is an
// *llm.APIError; anything malformed is an *llm.DecodeError.
func ParseEmbed(body []byte) (*llm.EmbedResult, error) {
	var r embedResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("embeddings: %w", err)}
	}
	if len(r.Data) == 0 && len(r.Error) > 0 && string(r.Error) != "null" {
		info, status := errorFromBody(&errorBody{Error: r.Error})
		return nil, apiError(info, status)
	}
	res := &llm.EmbedResult{Model: r.Model, Vectors: make([][]float32, len(r.Data))}
	if r.Usage != nil {
		res.Usage.PromptTokens = r.Usage.PromptTokens
	}
	for i, d := range r.Data {
		pos := i
		if d.Index != nil {
			pos = *d.Index
		}
		if pos < 0 || pos >= len(r.Data) || res.Vectors[pos] != nil {
			return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("embeddings: data[%d] has index %d out of range or repeated", i, pos)}
		}
		v, err := decodeVector(d.Embedding)
		if err != nil {
			return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("embeddings: data[%d]: %w", i, err)}
		}
		res.Vectors[pos] = v
	}
	return res, nil
}

// decodeVector reads a base64 little-endian float32 vector or a JSON array
// of numbers.
func decodeVector(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("no embedding")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return DecodeFloat32Base64(s)
	}
	var fs []float64
	if err := json.Unmarshal(raw, &fs); err != nil {
		return nil, err
	}
	out := make([]float32, len(fs))
	for i, f := range fs {
		out[i] = float32(f)
	}
	return out, nil
}

// DecodeFloat32Base64 decodes a base64 string of little-endian IEEE-754
// float32 values, the encoding of OpenAI's encoding_format "base64".
func DecodeFloat32Base64(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("base64 vector: %w", err)
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("base64 vector of %d bytes is not a whole number of float32 values", len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

type speechBody struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice,omitempty"`
	ResponseFormat string  `json:"response_format,omitempty"`
	Instructions   string  `json:"instructions,omitempty"`
	Speed          float64 `json:"speed,omitempty"`
}

// SpeechRequest builds POST /audio/speech. Errors are *llm.ConfigError.
func SpeechRequest(req *llm.SpeechRequest, o wire.BuildOptions) (*wire.Request, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	body, err := encodeJSON(speechBody{Model: req.Model, Input: req.Input, Voice: req.Voice, ResponseFormat: req.Format,
		Instructions: req.Instructions, Speed: req.Speed})
	if err != nil {
		return nil, err
	}
	return &wire.Request{Method: http.MethodPost, Path: speechPath, Body: body, Header: jsonHeader("*/*", req.Headers)}, nil
}

// ParseSpeech returns the audio bytes and the Content-Type exactly as the
// server sent them; a missing Content-Type leaves MIMEType empty. A JSON
// body holding an error object (some gateways answer 200 with one) is an
// *llm.APIError; an empty body is an *llm.DecodeError.
func ParseSpeech(body []byte, contentType string) (*llm.SpeechResult, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" {
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil && len(eb.Error) > 0 && string(eb.Error) != "null" {
			info, status := errorFromBody(&eb)
			return nil, apiError(info, status)
		}
	}
	if len(body) == 0 {
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("speech: empty audio body")}
	}
	return &llm.SpeechResult{Audio: body, MIMEType: contentType}, nil
}

// audioExtensions names a file extension for the audio MIME types that
// /audio/transcriptions accepts; the server infers the container from the
// file name.
var audioExtensions = map[string]string{
	"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mpga": "mpga", "audio/mp4": "m4a", "audio/m4a": "m4a",
	"audio/x-m4a": "m4a", "video/mp4": "mp4", "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
	"audio/webm": "webm", "video/webm": "webm", "audio/ogg": "ogg", "audio/flac": "flac", "audio/x-flac": "flac",
}

// transcriptionFile returns the file name and content type sent for the
// audio part.
func transcriptionFile(req *llm.TranscriptionRequest) (name, ctype string) {
	ctype = strings.ToLower(strings.TrimSpace(req.MIMEType))
	if mt, _, err := mime.ParseMediaType(ctype); err == nil {
		ctype = mt
	}
	name = req.Filename
	if name == "" {
		name = "audio"
		if ext, ok := audioExtensions[ctype]; ok {
			name += "." + ext
		}
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return name, ctype
}

// TranscriptionRequest builds POST /audio/transcriptions as a
// multipart/form-data body: file, model, response_format (json when the
// request names none), and language, prompt and temperature when set. The
// request's Content-Type carries the boundary. Errors are *llm.ConfigError;
// audio above llm.MaxTranscriptionBytes is rejected before anything is
// built.
func TranscriptionRequest(req *llm.TranscriptionRequest, o wire.BuildOptions) (*wire.Request, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	format := req.Format
	if format == "" {
		format = llm.TranscriptionJSON
	}
	var buf bytes.Buffer
	buf.Grow(len(req.Audio) + 1024)
	mw := multipart.NewWriter(&buf)
	name, ctype := transcriptionFile(req)
	ph := make(textproto.MIMEHeader, 2)
	ph.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": name}))
	ph.Set("Content-Type", ctype)
	fw, err := mw.CreatePart(ph)
	if err != nil {
		return nil, &llm.ConfigError{Field: "filename", Msg: err.Error()}
	}
	_, _ = fw.Write(req.Audio) // a bytes.Buffer never fails
	fields := [][2]string{{"model", req.Model}, {"response_format", string(format)}}
	if req.Language != "" {
		fields = append(fields, [2]string{"language", req.Language})
	}
	if req.Prompt != "" {
		fields = append(fields, [2]string{"prompt", req.Prompt})
	}
	if req.Temperature != nil {
		fields = append(fields, [2]string{"temperature", strconv.FormatFloat(*req.Temperature, 'f', -1, 64)})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return nil, &llm.ConfigError{Field: f[0], Msg: err.Error()}
		}
	}
	if err := mw.Close(); err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: err.Error()}
	}
	accept := "application/json"
	if format == llm.TranscriptionText {
		accept = "text/plain, application/json"
	}
	h := jsonHeader(accept, req.Headers)
	h.Set("Content-Type", mw.FormDataContentType())
	return &wire.Request{Method: http.MethodPost, Path: transcriptionsPath, Body: buf.Bytes(), Header: h}, nil
}

type transcriptionBody struct {
	Text     *string  `json:"text"`
	Language string   `json:"language"`
	Duration *float64 `json:"duration"`
	Segments []struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
	} `json:"segments"`
	Error json.RawMessage `json:"error"`
}

// ParseTranscription parses an /audio/transcriptions answer in the format
// that was asked for. text is the body itself (without its final line
// break); json and verbose_json read text, and verbose_json also language,
// duration and segments, each only when present. A text answer that is a
// JSON error object, or a JSON answer without text but with an error, is an
// *llm.APIError; malformed JSON is an *llm.DecodeError.
func ParseTranscription(body []byte, format llm.TranscriptionFormat, contentType string) (*llm.TranscriptionResult, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if format == llm.TranscriptionText && mt != "application/json" {
		return &llm.TranscriptionResult{Text: strings.TrimRight(string(body), "\r\n")}, nil
	}
	var r transcriptionBody
	if err := json.Unmarshal(body, &r); err != nil {
		if format == llm.TranscriptionText {
			return &llm.TranscriptionResult{Text: strings.TrimRight(string(body), "\r\n")}, nil
		}
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("transcription: %w", err)}
	}
	if r.Text == nil {
		if len(r.Error) > 0 && string(r.Error) != "null" {
			info, status := errorFromBody(&errorBody{Error: r.Error})
			return nil, apiError(info, status)
		}
		return nil, &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("transcription: no text in the answer")}
	}
	res := &llm.TranscriptionResult{Text: *r.Text, Language: r.Language}
	if r.Duration != nil {
		res.Duration = seconds(*r.Duration)
	}
	for _, s := range r.Segments {
		res.Segments = append(res.Segments, llm.Segment{Start: seconds(s.Start), End: seconds(s.End), Text: s.Text})
	}
	return res, nil
}

// seconds converts provider seconds to a Duration, rounded to the
// microsecond (float32 noise such as 36.709999084 stays visible otherwise).
func seconds(s float64) time.Duration {
	if s <= 0 || math.IsNaN(s) || s > 1e9 {
		return 0
	}
	return time.Duration(math.Round(s*1e6)) * time.Microsecond
}

// ModelsRequest builds GET /models; after, when set, asks for the page after
// that model id (servers that paginate with has_more/last_id).
func ModelsRequest(after string, o wire.BuildOptions) *wire.Request {
	path := modelsPath
	if after != "" {
		path += "?after=" + url.QueryEscape(after)
	}
	return &wire.Request{Method: http.MethodGet, Path: path, Header: jsonHeader("application/json", nil)}
}

type modelEntry struct {
	ID             string          `json:"id"`
	Name           flexString      `json:"name"`
	DisplayName    flexString      `json:"display_name"`
	Created        json.RawMessage `json:"created"`
	ContextLength  json.RawMessage `json:"context_length"`
	MaxContext     json.RawMessage `json:"max_context"`
	MaxInputTokens json.RawMessage `json:"max_input_tokens"`
	MaxOutput      json.RawMessage `json:"max_output_tokens"`
	MaxCompletion  json.RawMessage `json:"max_completion_tokens"`
	TopProvider    *struct {
		MaxCompletion json.RawMessage `json:"max_completion_tokens"`
	} `json:"top_provider"`
}

type modelsResponse struct {
	Data    []modelEntry    `json:"data"`
	Models  []modelEntry    `json:"models"`
	HasMore bool            `json:"has_more"`
	LastID  string          `json:"last_id"`
	Error   json.RawMessage `json:"error"`
}

// ParseModels parses a GET /models page. Entries come from data[] or, on
// servers that use it, models[]. ContextWindow is read from context_length,
// max_context or max_input_tokens and MaxOutputTokens from
// max_output_tokens, max_completion_tokens or OpenRouter's
// top_provider.max_completion_tokens, each only when present; Created is
// the unix time in created when it is positive. next is the cursor of the
// following page when the server says has_more (last_id, else the last
// entry's id), "" otherwise.
func ParseModels(body []byte) (models []llm.ModelInfo, next string, err error) {
	var r modelsResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, "", &llm.DecodeError{Provider: formatName, Err: fmt.Errorf("models: %w", err)}
	}
	entries := r.Data
	if len(entries) == 0 {
		entries = r.Models
	}
	if len(entries) == 0 && len(r.Error) > 0 && string(r.Error) != "null" {
		info, status := errorFromBody(&errorBody{Error: r.Error})
		return nil, "", apiError(info, status)
	}
	models = make([]llm.ModelInfo, 0, len(entries))
	for _, e := range entries {
		if e.ID == "" {
			continue
		}
		m := llm.ModelInfo{ID: e.ID, DisplayName: e.DisplayName.s}
		if m.DisplayName == "" {
			m.DisplayName = e.Name.s
		}
		if n := positiveInt(e.Created); n > 0 {
			m.Created = time.Unix(n, 0).UTC()
		}
		m.ContextWindow = int(firstPositive(e.ContextLength, e.MaxContext, e.MaxInputTokens))
		var top json.RawMessage
		if e.TopProvider != nil {
			top = e.TopProvider.MaxCompletion
		}
		m.MaxOutputTokens = int(firstPositive(e.MaxOutput, e.MaxCompletion, top))
		models = append(models, m)
	}
	if r.HasMore {
		next = r.LastID
		if next == "" && len(entries) > 0 {
			next = entries[len(entries)-1].ID
		}
	}
	return models, next, nil
}

// positiveInt reads a JSON number (or numeric string) as an integer; zero
// for anything else, negative values and fractions included.
func positiveInt(raw json.RawMessage) int64 {
	var f flexString
	if json.Unmarshal(raw, &f) != nil || f.s == "" {
		return 0
	}
	n, err := strconv.ParseInt(f.s, 10, 64)
	if err != nil {
		fl, ferr := strconv.ParseFloat(f.s, 64)
		if ferr != nil || fl != math.Trunc(fl) || fl > 1e15 {
			return 0
		}
		n = int64(fl)
	}
	return max(n, 0)
}

func firstPositive(vals ...json.RawMessage) int64 {
	for _, v := range vals {
		if n := positiveInt(v); n > 0 {
			return n
		}
	}
	return 0
}

// encodeJSON marshals v without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode: " + err.Error()}
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// jsonHeader returns the headers of a JSON request answered with accept,
// plus the caller's per-call headers.
func jsonHeader(accept string, extra map[string]string) http.Header {
	h := make(http.Header, len(extra)+2)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", accept)
	for k, v := range extra {
		h.Set(k, v)
	}
	return h
}
