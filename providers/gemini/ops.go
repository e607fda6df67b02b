package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// EmbedBatchSize is the most inputs one batchEmbedContents request carries
// (the API's limit is 100). Package providers splits larger requests into
// batches of this size and reassembles the vectors in input order. It is a
// variable so that tests and unusual deployments can change it.
var EmbedBatchSize = 100

// ModelsPageSize is the pageSize asked for on each GET /v1beta/models page.
const ModelsPageSize = 100

// modelPath returns /v1beta/models/{model} for a model name with or
// without its "models/" prefix, path-escaped.
func modelPath(model string) (string, string, error) {
	m := strings.TrimPrefix(strings.TrimSpace(model), "models/")
	if m == "" {
		return "", "", &llm.ConfigError{Field: "model", Msg: "is empty"}
	}
	return "/v1beta/models/" + url.PathEscape(m), m, nil
}

func jsonRequest(path string, v any, extra map[string]string) (*wire.Request, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode: " + err.Error()}
	}
	h := make(http.Header, len(extra)+2)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	for k, v := range extra {
		h.Set(k, v)
	}
	return &wire.Request{Method: http.MethodPost, Path: path, Body: bytes.TrimRight(buf.Bytes(), "\n"), Header: h}, nil
}

type embedContentRequest struct {
	Model                string  `json:"model"`
	Content              content `json:"content"`
	OutputDimensionality int     `json:"outputDimensionality,omitempty"`
}

// EmbedRequest builds POST /v1beta/models/{model}:batchEmbedContents with
// one request per input, each naming "models/{model}" and carrying
// outputDimensionality when Dimensions is set. Errors are *llm.ConfigError.
func EmbedRequest(req *llm.EmbedRequest, o wire.BuildOptions) (*wire.Request, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	path, model, err := modelPath(req.Model)
	if err != nil {
		return nil, err
	}
	items := make([]json.RawMessage, len(req.Inputs))
	for i, s := range req.Inputs {
		b, err := json.Marshal(embedContentRequest{Model: "models/" + model, Content: content{Parts: []part{textPart(s)}}, OutputDimensionality: req.Dimensions})
		if err != nil {
			return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode: " + err.Error()}
		}
		// A client's own fields (taskType, title) go on every item.
		items[i] = wire.SpliceExtra(b, req.Extra, formatName)
	}
	return jsonRequest(path+":batchEmbedContents", struct {
		Requests []json.RawMessage `json:"requests"`
	}{items}, req.Headers)
}

// ParseEmbed parses a batchEmbedContents answer: embeddings[].values in
// request order. Gemini reports no token usage for embeddings, so Usage
// stays zero. An error envelope is an *llm.APIError, malformed JSON an
// *llm.DecodeError.
func ParseEmbed(body []byte) (*llm.EmbedResult, error) {
	var r struct {
		Embeddings []struct {
			Values []float32 `json:"values"`
		} `json:"embeddings"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, decodeError("batchEmbedContents", err)
	}
	if r.Embeddings == nil {
		if e, ok := readErrorEnvelope(body); ok {
			return nil, apiError(e)
		}
		return nil, decodeError("batchEmbedContents", errNoField("embeddings"))
	}
	res := &llm.EmbedResult{Vectors: make([][]float32, len(r.Embeddings))}
	for i, e := range r.Embeddings {
		if e.Values == nil {
			return nil, decodeError("batchEmbedContents", fmt.Errorf("embeddings[%d] has no values", i))
		}
		res.Vectors[i] = e.Values
	}
	return res, nil
}

type speechConfig struct {
	VoiceConfig *voiceConfig `json:"voiceConfig,omitempty"`
}

type voiceConfig struct {
	PrebuiltVoiceConfig struct {
		VoiceName string `json:"voiceName"`
	} `json:"prebuiltVoiceConfig"`
}

// SpeechRequest builds a text-to-speech generateContent request:
// generationConfig.responseModalities ["AUDIO"] and, with a Voice, a
// speechConfig prebuilt voice. Instructions go before the text as a line of
// their own (Gemini TTS takes direction in the prompt). Gemini speaks raw
// PCM only and has no speed control: a Format other than "" or "pcm", or a
// Speed, is a *llm.ConfigError rather than silently ignored.
func SpeechRequest(req *llm.SpeechRequest, o wire.BuildOptions) (*wire.Request, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.Format != "" && !strings.EqualFold(req.Format, "pcm") {
		return nil, &llm.ConfigError{Field: "format", Msg: fmt.Sprintf("Gemini speech is PCM only (asked for %q); audio is never transcoded", req.Format)}
	}
	if req.Speed != 0 {
		return nil, &llm.ConfigError{Field: "speed", Msg: "Gemini speech has no speed control; say it in Instructions"}
	}
	path, _, err := modelPath(req.Model)
	if err != nil {
		return nil, err
	}
	text := req.Input
	if req.Instructions != "" {
		text = req.Instructions + "\n\n" + req.Input
	}
	var sc speechConfig
	if req.Voice != "" {
		sc.VoiceConfig = &voiceConfig{}
		sc.VoiceConfig.PrebuiltVoiceConfig.VoiceName = req.Voice
	}
	body := struct {
		Contents         []content `json:"contents"`
		GenerationConfig struct {
			ResponseModalities []string     `json:"responseModalities"`
			SpeechConfig       speechConfig `json:"speechConfig"`
		} `json:"generationConfig"`
	}{Contents: []content{{Role: "user", Parts: []part{textPart(text)}}}}
	body.GenerationConfig.ResponseModalities = []string{"AUDIO"}
	body.GenerationConfig.SpeechConfig = sc
	return jsonRequest(path+":generateContent", body, req.Headers)
}

// ParseSpeech reads the audio of a text-to-speech answer: the inlineData
// parts of the first candidate, concatenated, with the mimeType of the
// first one exactly as sent (e.g. "audio/L16;codec=pcm;rate=24000"). An
// answer without audio (a safety block, text only) is an *llm.DecodeError
// naming the finish reason; an error envelope is an *llm.APIError.
func ParseSpeech(body []byte) (*llm.SpeechResult, error) {
	var r struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					InlineData *blob `json:"inlineData"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason json.RawMessage `json:"finishReason"`
		} `json:"candidates"`
		ModelVersion   string          `json:"modelVersion"`
		PromptFeedback json.RawMessage `json:"promptFeedback"`
		Error          json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, decodeError("speech", err)
	}
	if len(r.Candidates) == 0 {
		if e, ok := readErrorEnvelope(body); ok {
			return nil, apiError(e)
		}
		return nil, decodeError("speech", fmt.Errorf("no candidate (promptFeedback %s)", compactOr(r.PromptFeedback, "none")))
	}
	res := &llm.SpeechResult{}
	c := r.Candidates[0]
	for _, p := range c.Content.Parts {
		if p.InlineData == nil || len(p.InlineData.Data) == 0 {
			continue
		}
		if res.MIMEType == "" {
			res.MIMEType = p.InlineData.MimeType
		}
		res.Audio = append(res.Audio, p.InlineData.Data...)
	}
	if len(res.Audio) == 0 {
		return nil, decodeError("speech", fmt.Errorf("no audio in the answer (finishReason %s)", compactOr(c.FinishReason, "none")))
	}
	res.Meta.Model = r.ModelVersion
	return res, nil
}

// CountTokensRequest builds POST /v1beta/models/{model}:countTokens with the
// whole generateContent request the chat call would send
// ({"generateContentRequest":{model, contents, systemInstruction, tools,
// toolConfig, generationConfig}}), so system instructions and tools are
// counted as the chat call will be billed. Errors are *llm.ConfigError.
func CountTokensRequest(req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, error) {
	o.Stream = false
	chat, err := Codec{}.ChatRequest(req, o)
	if err != nil {
		return nil, err
	}
	path, model, err := modelPath(req.Model)
	if err != nil {
		return nil, err
	}
	inner := bytes.TrimSpace(chat.Body)
	if len(inner) < 2 || inner[0] != '{' {
		return nil, &llm.ConfigError{Field: "request", Msg: "cannot encode"}
	}
	var buf bytes.Buffer
	buf.Grow(len(inner) + len(model) + 64)
	buf.WriteString(`{"generateContentRequest":{"model":`)
	buf.WriteString(strconv.Quote("models/" + model))
	if rest := bytes.TrimSpace(inner[1:]); len(rest) > 0 && rest[0] != '}' {
		buf.WriteByte(',')
	}
	buf.Write(inner[1:])
	buf.WriteByte('}')
	chat.Path = path + ":countTokens"
	chat.Body = buf.Bytes()
	chat.Header.Set("Accept", "application/json")
	return chat, nil
}

// ParseCountTokens parses a countTokens answer: totalTokens is the input
// count (cached content included). An answer without totalTokens is an
// *llm.DecodeError; an error envelope an *llm.APIError.
func ParseCountTokens(body []byte) (*llm.CountTokensResult, error) {
	var r struct {
		TotalTokens *int            `json:"totalTokens"`
		Error       json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, decodeError("countTokens", err)
	}
	if r.TotalTokens == nil {
		if e, ok := readErrorEnvelope(body); ok {
			return nil, apiError(e)
		}
		return nil, decodeError("countTokens", errNoField("totalTokens"))
	}
	return &llm.CountTokensResult{InputTokens: *r.TotalTokens}, nil
}

// ModelsRequest builds GET /v1beta/models?pageSize=100, with pageToken set
// to the previous page's nextPageToken when there was one.
func ModelsRequest(pageToken string, o wire.BuildOptions) *wire.Request {
	q := url.Values{"pageSize": {strconv.Itoa(ModelsPageSize)}}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	h := make(http.Header, 1)
	h.Set("Accept", "application/json")
	return &wire.Request{Method: http.MethodGet, Path: "/v1beta/models?" + q.Encode(), Header: h}
}

// ParseModels parses a GET /v1beta/models page: name without its "models/"
// prefix, displayName, inputTokenLimit as ContextWindow, outputTokenLimit
// as MaxOutputTokens and supportedGenerationMethods as Capabilities, each
// only when present. next is nextPageToken ("" on the last page).
func ParseModels(body []byte) (models []llm.ModelInfo, next string, err error) {
	var r struct {
		Models []struct {
			Name                       string   `json:"name"`
			DisplayName                string   `json:"displayName"`
			InputTokenLimit            int      `json:"inputTokenLimit"`
			OutputTokenLimit           int      `json:"outputTokenLimit"`
			SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
		NextPageToken string          `json:"nextPageToken"`
		Error         json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, "", decodeError("models", err)
	}
	if r.Models == nil {
		if e, ok := readErrorEnvelope(body); ok {
			return nil, "", apiError(e)
		}
	}
	models = make([]llm.ModelInfo, 0, len(r.Models))
	for _, m := range r.Models {
		id := strings.TrimPrefix(m.Name, "models/")
		if id == "" {
			continue
		}
		mi := llm.ModelInfo{ID: id, DisplayName: m.DisplayName, ContextWindow: max(m.InputTokenLimit, 0), MaxOutputTokens: max(m.OutputTokenLimit, 0)}
		if len(m.SupportedGenerationMethods) > 0 {
			mi.Capabilities = append([]string(nil), m.SupportedGenerationMethods...)
		}
		models = append(models, mi)
	}
	return models, r.NextPageToken, nil
}

type errNoField string

func (e errNoField) Error() string { return "no " + string(e) + " in the answer" }

// compactOr returns v as compact JSON text, or def when v is empty or null.
func compactOr(v json.RawMessage, def string) string {
	if len(bytes.TrimSpace(v)) == 0 || string(bytes.TrimSpace(v)) == "null" {
		return def
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return def
	}
	s := b.String()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
