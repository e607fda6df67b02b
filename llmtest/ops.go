package llmtest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/chorusrt/chorus/llm"
)

// Non-chat operations. The Server also answers, in each format that has
// them:
//
//   - Embeddings: POST {OpenAIBaseURL()}/embeddings ("input" a string or a
//     list, at most 2048; "encoding_format" "base64" gives little-endian
//     float32 base64 strings, anything else float arrays; "dimensions") and
//     POST /v1beta/models/{model}:batchEmbedContents (at most 100 requests,
//     each naming "models/{model}"; "outputDimensionality"). Vectors are
//     EmbeddingFor(input, dimensions), 8 dimensions by default. OpenAI data
//     entries are listed in reverse index order, so a client must place
//     them by "index". Usage (OpenAI only) is Reply.Usage.PromptTokens when
//     scripted, else the sum over inputs of len(input)/4+1.
//   - Speech: POST {OpenAIBaseURL()}/audio/speech answers SpeechAudio(input,
//     format) with the format's Content-Type (mp3 audio/mpeg, opus
//     audio/ogg, aac audio/aac, flac audio/flac, wav audio/wav, pcm
//     audio/pcm; a Reply.Header Content-Type overrides it); a Gemini
//     generateContent request whose generationConfig.responseModalities is
//     ["AUDIO"] answers one inlineData part of SpeechAudio(text, "pcm") with
//     mimeType "audio/L16;codec=pcm;rate=24000".
//   - Transcription: POST {OpenAIBaseURL()}/audio/transcriptions, a
//     multipart form with file and model (and response_format, language,
//     prompt, temperature). The transcript is the step's Reply text
//     ("simulated reply" by default); response_format text answers it as
//     text/plain, json as {"text"}, verbose_json adds language (the
//     request's, else "english"), duration (0.5 s per word) and segments of
//     up to three words.
//   - Token counting: POST /v1/messages/count_tokens (Anthropic, which
//     rejects max_tokens, stream and sampling fields as the real endpoint
//     does) and POST /v1beta/models/{model}:countTokens (Gemini, "contents"
//     or "generateContentRequest"). The count is Reply.Usage's input tokens
//     when scripted, else len(request body)/4.
//   - Model lists: GET {OpenAIBaseURL()}/models (all models in "data", or
//     pages with has_more/last_id and ?after= when SetModels gave a page
//     size), GET /v1/models with an anthropic-version header (limit,
//     after_id, has_more, last_id) and GET /v1beta/models (pageSize,
//     pageToken, nextPageToken). The list is DefaultModels unless SetModels
//     replaced it; a field left zero in a Model is not sent.
//
// Every such request is recorded like a chat request and consumes one
// scripted Step (one per page for model lists), so faults apply: a status
// with retry-after, a reset before the headers, a stall before the headers,
// a body cut in half (premature close, reset mid-stream, truncated JSON), a
// malformed body, an error body with status 200 (in-stream error) and a
// slow drip. Rate-limit emulation charges them like chat requests.

// DefaultEmbeddingDimensions is the vector length when a request asks for
// none.
const DefaultEmbeddingDimensions = 8

// Batch limits the server enforces, as the real APIs do.
const (
	maxOpenAIEmbeddingInputs = 2048
	maxGeminiEmbedRequests   = 100
)

// EmbeddingFor returns the vector the Server answers for text: dims values
// in [-1, 1) derived from an FNV-1a hash of text, so a test can predict
// them exactly. dims <= 0 means DefaultEmbeddingDimensions.
func EmbeddingFor(text string, dims int) []float32 {
	if dims <= 0 {
		dims = DefaultEmbeddingDimensions
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, text)
	x := h.Sum64() | 1
	out := make([]float32, dims)
	for i := range out {
		// xorshift64*
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := x * 2685821657736338717
		out[i] = float32(int32(v>>32)) / float32(1<<31)
	}
	return out
}

// SpeechAudio returns the audio bytes the Server answers for input in
// format (a tagged copy of the text, so a test can check what was spoken).
func SpeechAudio(input, format string) []byte {
	if format == "" {
		format = "mp3"
	}
	return []byte("LLMTEST-AUDIO/" + format + "\x00" + input)
}

// speechContentTypes are the Content-Types of the OpenAI speech formats.
var speechContentTypes = map[string]string{
	"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm",
}

// geminiSpeechMIME is the mimeType Gemini TTS sends.
const geminiSpeechMIME = "audio/L16;codec=pcm;rate=24000"

// Model is one entry of the fake model list. A zero field is not sent.
type Model struct {
	ID              string
	DisplayName     string
	Created         time.Time
	ContextWindow   int
	MaxOutputTokens int
	// Capabilities are sent as Gemini supportedGenerationMethods.
	Capabilities []string
}

// DefaultModels is the model list a Server answers until SetModels
// replaces it: one model with every field set, one with limits only, and
// one with nothing but its id.
var DefaultModels = []Model{
	{ID: "llmtest-model", DisplayName: "LLMTest Model", Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		ContextWindow: 128000, MaxOutputTokens: 8192, Capabilities: []string{"generateContent", "countTokens"}},
	{ID: "llmtest-embed", ContextWindow: 8192, Capabilities: []string{"embedContent"}},
	{ID: "llmtest-tts"},
}

type modelList struct {
	mu       sync.Mutex
	models   []Model
	pageSize int
}

// modelLists holds the SetModels state of each Server, keyed weakly so a
// Server that is no longer used is collected with its entry.
var modelLists sync.Map // weak.Pointer[Server] -> *modelList

func (s *Server) modelList() *modelList {
	key := weak.Make(s)
	if v, ok := modelLists.Load(key); ok {
		return v.(*modelList)
	}
	ml := &modelList{models: DefaultModels}
	v, loaded := modelLists.LoadOrStore(key, ml)
	if !loaded {
		runtime.AddCleanup(s, func(k weak.Pointer[Server]) { modelLists.Delete(k) }, key)
	}
	return v.(*modelList)
}

// SetModels replaces the model list every format serves. pageSize, when
// positive, caps every page (the client's own limit applies too, and the
// OpenAI format then paginates with has_more/last_id); zero leaves page
// sizes to the client and the format's defaults.
func (s *Server) SetModels(pageSize int, models ...Model) {
	ml := s.modelList()
	cp := make([]Model, len(models))
	for i, m := range models {
		m.Capabilities = append([]string(nil), m.Capabilities...)
		cp[i] = m
	}
	ml.mu.Lock()
	ml.models, ml.pageSize = cp, max(pageSize, 0)
	ml.mu.Unlock()
}

func (ml *modelList) snapshot() ([]Model, int) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.models, ml.pageSize
}

// opKind names a non-chat operation.
type opKind int

const (
	opEmbed opKind = iota + 1
	opSpeech
	opTranscribe
	opCount
	opModels
)

// opRequest is a non-chat request being answered.
type opRequest struct {
	kind   opKind
	format Format
	model  string
	body   []byte
	r      *http.Request
	// form is the parsed multipart body of a transcription (nil when it
	// did not parse; formErr says why).
	form    *multipart.Form
	formErr error
	// usage is the scripted Reply.Usage, nil when the reply has none.
	usage *llm.Usage
}

// opHandler returns the handler of a non-chat operation (embeddings,
// speech, transcription, token counting, model listing), or nil for chat
// paths, which route() serves.
func (s *Server) opHandler(r *http.Request, body []byte) func(w http.ResponseWriter, r *http.Request, body []byte) {
	if h := s.batchRoute(r); h != nil { // WithBatchAPI: batchapi.go
		return h
	}
	op, ok := classifyOp(r, body)
	if !ok {
		return nil
	}
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		op.r, op.body = r, body
		s.serveOp(w, op)
	}
}

// classifyOp recognises the paths of the non-chat operations.
func classifyOp(r *http.Request, body []byte) (*opRequest, bool) {
	p := r.URL.Path
	anthropicHeaders := r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != ""
	switch {
	case p == "/v1beta/models" || p == "/v1beta/models/":
		return &opRequest{kind: opModels, format: FormatGemini}, true
	case strings.HasPrefix(p, "/v1beta/models/") || strings.HasPrefix(p, "/v1/models/"):
		rest := p[strings.Index(p, "/models/")+len("/models/"):]
		model, action, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, false
		}
		op := &opRequest{format: FormatGemini, model: model}
		switch action {
		case "batchEmbedContents":
			op.kind = opEmbed
		case "countTokens":
			op.kind = opCount
		case "generateContent":
			if !wantsAudio(body) {
				return nil, false
			}
			op.kind = opSpeech
		default:
			return nil, false
		}
		return op, true
	case p == "/v1/messages/count_tokens":
		return &opRequest{kind: opCount, format: FormatAnthropic}, true
	case p == "/v1/models" && anthropicHeaders:
		return &opRequest{kind: opModels, format: FormatAnthropic}, true
	case strings.HasSuffix(p, "/embeddings"):
		return &opRequest{kind: opEmbed, format: FormatOpenAI}, true
	case strings.HasSuffix(p, "/audio/speech"):
		return &opRequest{kind: opSpeech, format: FormatOpenAI}, true
	case strings.HasSuffix(p, "/audio/transcriptions"):
		return &opRequest{kind: opTranscribe, format: FormatOpenAI}, true
	case strings.HasSuffix(p, "/models"):
		return &opRequest{kind: opModels, format: FormatOpenAI}, true
	}
	return nil, false
}

// wantsAudio reports whether a generateContent body asks for the AUDIO
// response modality.
func wantsAudio(body []byte) bool {
	var req struct {
		GenerationConfig struct {
			ResponseModalities []string `json:"responseModalities"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	for _, m := range req.GenerationConfig.ResponseModalities {
		if strings.EqualFold(m, "AUDIO") {
			return true
		}
	}
	return false
}

func codecOf(f Format) codec {
	switch f {
	case FormatAnthropic:
		return anthropic{}
	case FormatGemini:
		return gemini{}
	default:
		return openAI{}
	}
}

// opAnswer is a rendered successful answer.
type opAnswer struct {
	contentType string
	body        []byte
}

// errBadRequest is a request the fake refuses with 400, as the real API would.
type errBadRequest struct{ msg string }

func (e *errBadRequest) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &errBadRequest{msg: fmt.Sprintf("llmtest: "+format, args...)}
}

func (s *Server) serveOp(w http.ResponseWriter, op *opRequest) {
	r := op.r
	c := codecOf(op.format)
	model := op.model
	if model == "" && len(op.body) > 0 {
		var m struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(op.body, &m) == nil {
			model = m.Model
		}
	}
	if op.kind == opTranscribe {
		op.form, op.formErr = parseForm(r, op.body)
		if op.form != nil {
			defer func() { _ = op.form.RemoveAll() }()
			if v := op.form.Value["model"]; len(v) > 0 {
				model = v[0]
			}
		}
	}
	x := &exchange{format: op.format, codec: c, model: model, body: op.body, key: requestKey(r)}
	rec := Recorded{Format: op.format, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: op.body, Model: model, At: s.now()}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	x.seq = len(s.reqs)
	s.mu.Unlock()

	wantMethod := http.MethodPost
	if op.kind == opModels {
		wantMethod = http.MethodGet
	}
	if r.Method != wantMethod {
		s.writeError(w, c, http.StatusMethodNotAllowed, &Fault{Message: "llmtest: use " + wantMethod})
		return
	}
	step, p, st, ok := s.take(x)
	if st != nil {
		c.rateHeaders(w.Header(), st)
	}
	if !ok {
		s.writeError(w, c, http.StatusTooManyRequests, st.fault(x.format, p.model))
		return
	}
	s.setRequestID(w.Header(), x)
	if !s.sleep(r.Context(), s.cfg.first) {
		return
	}
	f := step.Fault
	if f != nil && f.Kind == FaultStatus {
		setHeaders(w.Header(), f.Header)
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		s.writeError(w, c, status, f)
		return
	}
	if f != nil && f.Kind == FaultResetBeforeHeaders {
		s.reset(w)
		return
	}
	if f != nil && f.Kind == FaultStall {
		if !s.sleep(r.Context(), f.Stall) {
			return
		}
	}
	switch {
	case f != nil && f.Reply != nil:
		op.usage = f.Reply.Usage
	case step.Reply != nil:
		op.usage = step.Reply.Usage
	case step.Fault == nil:
		op.usage = s.cfg.def.Usage
	}
	ans, err := s.renderOp(op, p)
	if err != nil {
		var br *errBadRequest
		status := http.StatusInternalServerError
		if errors.As(err, &br) {
			status = http.StatusBadRequest
		}
		s.writeError(w, c, status, &Fault{Message: err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", ans.contentType)
	setHeaders(h, p.header)
	if f != nil {
		setHeaders(h, f.Header)
	}
	s.writeOpBody(w, r, c, ans.body, f)
}

// writeOpBody writes a buffered answer (a chat answer or another
// operation's), applying the body faults.
func (s *Server) writeOpBody(w http.ResponseWriter, r *http.Request, c codec, body []byte, f *Fault) {
	kind := FaultKind(0)
	if f != nil {
		kind = f.Kind
	}
	h := w.Header()
	rc := http.NewResponseController(w)
	switch kind {
	case FaultMalformedLine:
		body = []byte("{not json")
	case FaultTruncatedJSON:
		body = body[:len(body)/2]
	case FaultInStreamError:
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		body = c.errorBody(status, f)
		h.Set("Content-Type", "application/json")
	case FaultResetMidStream, FaultPrematureClose:
		h.Set("Content-Length", itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(body[:len(body)/2]); err != nil {
			return
		}
		_ = rc.Flush()
		if kind == FaultResetMidStream {
			s.reset(w)
		}
		return
	case FaultSlowDrip:
		h.Set("Content-Length", itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		pieces := split(string(body), max(len(body)/8, 1))
		for _, piece := range pieces {
			if !s.sleep(r.Context(), f.Stall/time.Duration(len(pieces))) {
				return
			}
			if _, err := io.WriteString(w, piece); err != nil {
				return
			}
			_ = rc.Flush()
		}
		return
	}
	h.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *Server) renderOp(op *opRequest, p *plan) (*opAnswer, error) {
	switch op.kind {
	case opEmbed:
		if op.format == FormatGemini {
			return geminiEmbed(op, p)
		}
		return openAIEmbed(op, p)
	case opSpeech:
		if op.format == FormatGemini {
			return geminiSpeech(op, p)
		}
		return openAISpeech(op, p)
	case opTranscribe:
		return transcribe(op, p)
	case opCount:
		if op.format == FormatGemini {
			return geminiCount(op, p)
		}
		return anthropicCount(op, p)
	case opModels:
		models, pageSize := s.modelList().snapshot()
		switch op.format {
		case FormatAnthropic:
			return anthropicModels(op, models, pageSize)
		case FormatGemini:
			return geminiModels(op, models, pageSize)
		}
		return openAIModels(op, models, pageSize)
	}
	return nil, fmt.Errorf("llmtest: unknown operation")
}

func jsonAnswer(v any) *opAnswer { return &opAnswer{contentType: "application/json", body: marshal(v)} }

// inputTokens is the scripted input count, else len(body)/4.
func inputTokens(p *plan) int { return p.usage.InputTokens() }

func openAIEmbed(op *opRequest, p *plan) (*opAnswer, error) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("request body is not JSON: %v", err)
	}
	if req.Model == "" {
		return nil, badRequest("you must provide a model parameter")
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			return nil, badRequest("'input' must be a string or an array of strings")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 || len(inputs) > maxOpenAIEmbeddingInputs {
		return nil, badRequest("'input' must hold 1 to %d items, got %d", maxOpenAIEmbeddingInputs, len(inputs))
	}
	if req.Dimensions < 0 {
		return nil, badRequest("'dimensions' must be positive")
	}
	type datum struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]datum, 0, len(inputs))
	tokens := 0
	for i := len(inputs) - 1; i >= 0; i-- {
		if inputs[i] == "" {
			return nil, badRequest("'input[%d]' is empty", i)
		}
		v := EmbeddingFor(inputs[i], req.Dimensions)
		var emb any = v
		if req.EncodingFormat == "base64" {
			emb = float32Base64(v)
		}
		data = append(data, datum{Object: "embedding", Index: i, Embedding: emb})
	}
	for _, in := range inputs {
		tokens += len(in)/4 + 1
	}
	if op.usage != nil {
		tokens = op.usage.PromptTokens
	}
	return jsonAnswer(map[string]any{
		"object": "list", "data": data, "model": p.model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	}), nil
}

func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

type gmTextParts struct {
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

func (c gmTextParts) text() string {
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func geminiEmbed(op *opRequest, p *plan) (*opAnswer, error) {
	var req struct {
		Requests []struct {
			Model                string      `json:"model"`
			Content              gmTextParts `json:"content"`
			OutputDimensionality int         `json:"outputDimensionality"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("Invalid JSON payload received. %v", err)
	}
	if len(req.Requests) == 0 || len(req.Requests) > maxGeminiEmbedRequests {
		return nil, badRequest("* BatchEmbedContentsRequest.requests: at most %d requests can be in one batch, got %d", maxGeminiEmbedRequests, len(req.Requests))
	}
	type emb struct {
		Values []float32 `json:"values"`
	}
	out := make([]emb, len(req.Requests))
	for i, r := range req.Requests {
		if r.Model != "models/"+op.model {
			return nil, badRequest("* BatchEmbedContentsRequest.requests[%d].model: unexpected model name format %q (the batch is for models/%s)", i, r.Model, op.model)
		}
		text := r.Content.text()
		if text == "" {
			return nil, badRequest("* BatchEmbedContentsRequest.requests[%d].content: contents is not specified", i)
		}
		out[i] = emb{Values: EmbeddingFor(text, r.OutputDimensionality)}
	}
	return jsonAnswer(map[string]any{"embeddings": out}), nil
}

func openAISpeech(op *opRequest, p *plan) (*opAnswer, error) {
	var req struct {
		Model          string  `json:"model"`
		Input          string  `json:"input"`
		Voice          string  `json:"voice"`
		ResponseFormat string  `json:"response_format"`
		Speed          float64 `json:"speed"`
	}
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("request body is not JSON: %v", err)
	}
	if req.Model == "" || req.Input == "" {
		return nil, badRequest("'model' and 'input' are required")
	}
	format := req.ResponseFormat
	if format == "" {
		format = "mp3"
	}
	ct, ok := speechContentTypes[format]
	if !ok {
		return nil, badRequest("'response_format' %q is not one of mp3, opus, aac, flac, wav, pcm", format)
	}
	if req.Speed != 0 && (req.Speed < 0.25 || req.Speed > 4) {
		return nil, badRequest("'speed' must be between 0.25 and 4")
	}
	return &opAnswer{contentType: ct, body: SpeechAudio(req.Input, format)}, nil
}

func geminiSpeech(op *opRequest, p *plan) (*opAnswer, error) {
	var req struct {
		Contents []gmTextParts `json:"contents"`
	}
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("Invalid JSON payload received. %v", err)
	}
	var text strings.Builder
	for _, c := range req.Contents {
		text.WriteString(c.text())
	}
	if text.Len() == 0 {
		return nil, badRequest("* GenerateContentRequest.contents: contents is not specified")
	}
	audio := SpeechAudio(text.String(), "pcm")
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{map[string]any{
				"inlineData": map[string]any{"mimeType": geminiSpeechMIME, "data": base64.StdEncoding.EncodeToString(audio)},
			}}},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]int{"promptTokenCount": inputTokens(p), "candidatesTokenCount": len(audio) / 4, "totalTokenCount": inputTokens(p) + len(audio)/4},
		"modelVersion":  p.model,
		"responseId":    p.gmID(),
	}
	return jsonAnswer(resp), nil
}

func transcribe(op *opRequest, p *plan) (*opAnswer, error) {
	if op.formErr != nil {
		return nil, op.formErr
	}
	form := op.form
	field := func(k string) string {
		if v := form.Value[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	files := form.File["file"]
	if len(files) == 0 || files[0].Size == 0 || files[0].Filename == "" {
		return nil, badRequest("'file' is required and must be a named, non-empty file")
	}
	if field("model") == "" {
		return nil, badRequest("'model' is required")
	}
	if t := field("temperature"); t != "" {
		if v, err := strconv.ParseFloat(t, 64); err != nil || v < 0 || v > 1 {
			return nil, badRequest("'temperature' must be between 0 and 1")
		}
	}
	text := p.textString()
	words := strings.Fields(text)
	const perWord = 0.5
	duration := float64(len(words)) * perWord
	switch format := field("response_format"); format {
	case "text":
		return &opAnswer{contentType: "text/plain; charset=utf-8", body: []byte(text + "\n")}, nil
	case "", "json":
		return jsonAnswer(map[string]any{"text": text, "usage": map[string]any{"type": "duration", "seconds": int(math.Ceil(duration))}}), nil
	case "verbose_json":
		lang := field("language")
		if lang == "" {
			lang = "english"
		}
		type segment struct {
			ID    int     `json:"id"`
			Seek  int     `json:"seek"`
			Start float64 `json:"start"`
			End   float64 `json:"end"`
			Text  string  `json:"text"`
		}
		segs := []segment{}
		for i := 0; i < len(words); i += 3 {
			j := min(i+3, len(words))
			segs = append(segs, segment{ID: len(segs), Start: float64(i) * perWord, End: float64(j) * perWord, Text: " " + strings.Join(words[i:j], " ")})
		}
		return jsonAnswer(map[string]any{"task": "transcribe", "language": lang, "duration": duration, "text": text, "segments": segs,
			"usage": map[string]any{"type": "duration", "seconds": int(math.Ceil(duration))}}), nil
	default:
		return nil, badRequest("'response_format' %q is not served by llmtest (text, json, verbose_json)", format)
	}
}

// parseForm reads a multipart/form-data body held in memory.
func parseForm(r *http.Request, body []byte) (*multipart.Form, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, badRequest("Content-Type must be multipart/form-data with a boundary")
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(maxBody)
	if err != nil {
		return nil, badRequest("malformed multipart body: %v", err)
	}
	return form, nil
}

func anthropicCount(op *opRequest, p *plan) (*opAnswer, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("request body is not JSON: %v", err)
	}
	for _, k := range []string{"max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences"} {
		if _, ok := req[k]; ok {
			return nil, badRequest("%s: Extra inputs are not permitted", k)
		}
	}
	if _, ok := req["model"]; !ok {
		return nil, badRequest("model: Field required")
	}
	if _, ok := req["messages"]; !ok {
		return nil, badRequest("messages: Field required")
	}
	return jsonAnswer(map[string]int{"input_tokens": inputTokens(p)}), nil
}

func geminiCount(op *opRequest, p *plan) (*opAnswer, error) {
	var req struct {
		Contents               json.RawMessage `json:"contents"`
		GenerateContentRequest *struct {
			Model    string          `json:"model"`
			Contents json.RawMessage `json:"contents"`
		} `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(op.body, &req); err != nil {
		return nil, badRequest("Invalid JSON payload received. %v", err)
	}
	switch g := req.GenerateContentRequest; {
	case g != nil && len(req.Contents) > 0:
		return nil, badRequest("contents and generateContentRequest are mutually exclusive")
	case g != nil && g.Model != "models/"+op.model:
		return nil, badRequest("* CountTokensRequest.generate_content_request.model: %q does not name models/%s", g.Model, op.model)
	case g == nil && len(req.Contents) == 0:
		return nil, badRequest("* CountTokensRequest.contents: contents is not specified")
	}
	n := inputTokens(p)
	return jsonAnswer(map[string]any{"totalTokens": n, "promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": n}}}), nil
}

// page returns the models of one page starting at start, and whether more follow.
func page(models []Model, start, size int) ([]Model, bool) {
	start = min(max(start, 0), len(models))
	end := min(start+size, len(models))
	return models[start:end], end < len(models)
}

func indexOf(models []Model, id string) int {
	for i, m := range models {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func openAIModels(op *opRequest, models []Model, pageSize int) (*opAnswer, error) {
	start, size := 0, len(models)
	if pageSize > 0 {
		size = pageSize
		if after := op.r.URL.Query().Get("after"); after != "" {
			i := indexOf(models, after)
			if i < 0 {
				return nil, badRequest("no model %q to list after", after)
			}
			start = i + 1
		}
	}
	pg, more := page(models, start, max(size, 1))
	data := make([]map[string]any, 0, len(pg))
	for _, m := range pg {
		e := map[string]any{"id": m.ID, "object": "model", "owned_by": "llmtest", "created": 0}
		if !m.Created.IsZero() {
			e["created"] = m.Created.Unix()
		}
		if m.DisplayName != "" {
			e["name"] = m.DisplayName
		}
		if m.ContextWindow > 0 {
			e["context_length"] = m.ContextWindow
		}
		if m.MaxOutputTokens > 0 {
			e["max_completion_tokens"] = m.MaxOutputTokens
		}
		data = append(data, e)
	}
	resp := map[string]any{"object": "list", "data": data}
	if pageSize > 0 {
		resp["has_more"] = more
		if len(pg) > 0 {
			resp["first_id"], resp["last_id"] = pg[0].ID, pg[len(pg)-1].ID
		}
	}
	return jsonAnswer(resp), nil
}

func anthropicModels(op *opRequest, models []Model, pageSize int) (*opAnswer, error) {
	q := op.r.URL.Query()
	size := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, badRequest("limit: Input should be between 1 and 1000")
		}
		size = n
	}
	if pageSize > 0 {
		size = min(size, pageSize)
	}
	start := 0
	if after := q.Get("after_id"); after != "" {
		i := indexOf(models, after)
		if i < 0 {
			return nil, badRequest("after_id: no model %q", after)
		}
		start = i + 1
	}
	pg, more := page(models, start, size)
	data := make([]map[string]any, 0, len(pg))
	for _, m := range pg {
		e := map[string]any{"type": "model", "id": m.ID, "display_name": m.DisplayName}
		if m.DisplayName == "" {
			e["display_name"] = m.ID
		}
		if !m.Created.IsZero() {
			e["created_at"] = m.Created.UTC().Format(time.RFC3339)
		}
		if m.ContextWindow > 0 {
			e["max_input_tokens"] = m.ContextWindow
		}
		if m.MaxOutputTokens > 0 {
			e["max_tokens"] = m.MaxOutputTokens
		}
		data = append(data, e)
	}
	resp := map[string]any{"data": data, "has_more": more, "first_id": nil, "last_id": nil}
	if len(pg) > 0 {
		resp["first_id"], resp["last_id"] = pg[0].ID, pg[len(pg)-1].ID
	}
	return jsonAnswer(resp), nil
}

func geminiModels(op *opRequest, models []Model, pageSize int) (*opAnswer, error) {
	q := op.r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("pageSize must be a non-negative integer")
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	if pageSize > 0 {
		size = min(size, pageSize)
	}
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, aerr := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || aerr != nil || !strings.HasPrefix(string(b), "offset:") || n < 0 || n > len(models) {
			return nil, badRequest("Invalid page token %q", tok)
		}
		start = n
	}
	pg, more := page(models, start, size)
	out := make([]map[string]any, 0, len(pg))
	for _, m := range pg {
		e := map[string]any{"name": "models/" + m.ID, "version": "001"}
		if m.DisplayName != "" {
			e["displayName"] = m.DisplayName
		}
		if m.ContextWindow > 0 {
			e["inputTokenLimit"] = m.ContextWindow
		}
		if m.MaxOutputTokens > 0 {
			e["outputTokenLimit"] = m.MaxOutputTokens
		}
		if len(m.Capabilities) > 0 {
			e["supportedGenerationMethods"] = m.Capabilities
		}
		out = append(out, e)
	}
	resp := map[string]any{"models": out}
	if more {
		resp["nextPageToken"] = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(start+len(pg))))
	}
	return jsonAnswer(resp), nil
}
