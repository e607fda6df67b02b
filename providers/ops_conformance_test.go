package providers

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
)

// opKind names the non-chat operation a recorded exchange exercises.
type opKind string

const (
	opEmbed      opKind = "embeddings"
	opCount      opKind = "count_tokens"
	opModels     opKind = "list_models"
	opTranscribe opKind = "transcription"
)

// opExchange is a recorded exchange classified for replay.
type opExchange struct {
	kind   opKind
	format Format
	model  string
}

var geminiOpRe = regexp.MustCompile(`/models/([^:/?]+):(batchEmbedContents|countTokens)$`)

// classifyOp decides whether a recorded exchange is a non-chat operation
// and how to replay it. ok is false for exchanges that are not one (chat);
// a non-empty why means an operation-like exchange that is skipped.
func classifyOp(e fixture.Entry, ex fixture.Exchange) (op opExchange, why string, ok bool) {
	u, _ := url.Parse(ex.Request.URL)
	path := ""
	if u != nil {
		path = u.Path
	}
	var rb struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(ex.Request.Body, &rb)
	op.model = rb.Model
	switch {
	case path == "" && strings.Contains(e.File, "/embedding/__fixtures__/"):
		return opExchange{kind: opEmbed, format: FormatOpenAI, model: "recorded-model"}, "", true
	case path == "" && strings.Contains(e.File, "/transcription/__fixtures__/"):
		return opExchange{kind: opTranscribe, format: FormatOpenAI, model: "recorded-model"}, "", true
	case strings.HasSuffix(path, "/responses/input_tokens"):
		return op, "OpenAI Responses /responses/input_tokens: CountTokens on the OpenAI format is unsupported (no Chat Completions counting endpoint)", true
	case strings.HasPrefix(path, "/api/embed"):
		return op, "Ollama native /api/embed (Chorus reaches Ollama through its OpenAI-compatible /v1)", true
	case strings.HasSuffix(path, "/available-models"):
		return op, "Heroku /available-models is not a model list of any supported format", true
	case strings.HasSuffix(path, "/embeddings"):
		op.kind, op.format = opEmbed, FormatOpenAI
	case strings.HasSuffix(path, "/v1/messages/count_tokens"):
		op.kind, op.format = opCount, FormatAnthropic
	case geminiOpRe.MatchString(path):
		m := geminiOpRe.FindStringSubmatch(path)
		op.format, op.model = FormatGemini, m[1]
		op.kind = opEmbed
		if m[2] == "countTokens" {
			op.kind = opCount
		}
	case ex.Request.Method == "GET" && strings.HasSuffix(path, "/v1beta/models"):
		op.kind, op.format = opModels, FormatGemini
	case ex.Request.Method == "GET" && strings.HasSuffix(path, "/v1/models"):
		op.kind, op.format = opModels, FormatOpenAI
		if e.Provider == "anthropic" {
			op.format = FormatAnthropic
		}
	case strings.Contains(path, "/audio/"):
		return op, "audio endpoint without a replayable body", true
	default:
		return op, "", false
	}
	if op.model == "" {
		op.model = "recorded-model"
	}
	if ex.Response.Status == 0 || len(ex.Response.Body) == 0 {
		return op, "no recorded response body", true
	}
	return op, "", true
}

// TestConformanceOps replays every non-synthetic recorded exchange of a
// non-chat operation (embeddings, token counts, model lists, the
// transcription body) through fixture.NewServer and the Client, and checks
// the result against an independent encoding/json read of the recording:
// the number of vectors and each one's values, the token count, the model
// ids and their limits, the transcript. Recorded errors must come back as an
// *llm.APIError with the recorded status.
func TestConformanceOps(t *testing.T) {
	dir := fixture.Require(t)
	entries, err := fixture.LoadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	replayed := map[opKind]int{}
	total, errorsReplayed := 0, 0
	skipped := map[string][]string{}
	for _, e := range entries {
		exs, err := fixture.Load(dir, e)
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		for i, ex := range exs {
			op, why, ok := classifyOp(e, ex)
			if !ok {
				continue
			}
			name := fmt.Sprintf("%s#%d", e.File, i)
			if e.Synthetic() {
				skipped["synthetic"] = append(skipped["synthetic"], name)
				continue
			}
			if why != "" {
				skipped[why] = append(skipped[why], name)
				continue
			}
			t.Run(name, func(t *testing.T) {
				if replayOp(t, e, ex, op) {
					errorsReplayed++
				}
			})
			replayed[op.kind]++
			total++
		}
	}
	t.Logf("conformance: ops replayed %d (%d of them error answers) %v", total, errorsReplayed, replayed)
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		t.Logf("conformance: ops skipped %d: %s", len(skipped[r]), r)
		for _, f := range skipped[r] {
			t.Logf("conformance:   - %s", f)
		}
	}
	for _, k := range []opKind{opEmbed, opCount, opModels, opTranscribe} {
		if replayed[k] == 0 {
			t.Errorf("no recorded %s exchange replayed", k)
		}
	}
	if total < 30 {
		t.Fatalf("only %d operation exchanges replayed; the corpus has more", total)
	}
}

// replayOp replays one exchange; it reports whether it was an error answer.
func replayOp(t *testing.T, e fixture.Entry, ex fixture.Exchange, op opExchange) bool {
	srv := fixture.NewServer([]fixture.Exchange{ex})
	defer srv.Close()
	c := newClient(t, Config{ID: e.Provider, Format: op.format, BaseURL: srv.URL, APIKey: testKey}, WithRetryPolicy(RetryPolicy{MaxAttempts: 1}))
	defer c.hc.CloseIdleConnections()
	var meta llm.ResponseMeta
	var err error
	switch op.kind {
	case opEmbed:
		meta, err = replayEmbed(t, c, ex, op)
	case opCount:
		meta, err = replayCount(t, c, ex, op)
	case opModels:
		err = replayModels(t, c, ex, op)
	case opTranscribe:
		meta, err = replayTranscription(t, c, ex)
	}
	if ex.Response.Status/100 != 2 {
		var api *llm.APIError
		if !errors.As(err, &api) || api.Status != ex.Response.Status || api.Message == "" {
			t.Fatalf("recorded %d: got %v, want an APIError with that status and a message", ex.Response.Status, err)
		}
		return true
	}
	if err != nil {
		t.Fatalf("replay failed: %v", err)
	}
	if srv.Served() != 1 {
		t.Fatalf("%d recorded answers served, want 1", srv.Served())
	}
	for h := range ex.Response.Header {
		if strings.HasPrefix(strings.ToLower(h), "x-ratelimit-limit") && !meta.RateLimit.HasRequests && !meta.RateLimit.HasTokens {
			t.Errorf("recorded %s but no rate limit parsed", h)
		}
	}
	return false
}

// recordedInputs reads the inputs of a recorded embeddings request, or
// invents n placeholders when only the answer was recorded.
func recordedInputs(ex fixture.Exchange, format Format, n int) ([]string, int) {
	var rb struct {
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
		Requests   []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			OutputDimensionality int `json:"outputDimensionality"`
		} `json:"requests"`
	}
	if json.Unmarshal(ex.Request.Body, &rb) == nil {
		var in []string
		if format == FormatGemini {
			for _, r := range rb.Requests {
				var s strings.Builder
				for _, p := range r.Content.Parts {
					s.WriteString(p.Text)
				}
				in = append(in, s.String())
				rb.Dimensions = r.OutputDimensionality
			}
		} else if json.Unmarshal(rb.Input, &in) != nil {
			var one string
			if json.Unmarshal(rb.Input, &one) == nil {
				in = []string{one}
			}
		}
		if len(in) > 0 {
			return in, rb.Dimensions
		}
	}
	in := make([]string, max(n, 1))
	for i := range in {
		in[i] = fmt.Sprintf("recorded input %d", i)
	}
	return in, 0
}

// recordedVectors reads the vectors of a recorded answer independently:
// OpenAI data[] by index (base64 little-endian float32 or numbers), Gemini
// embeddings[].values.
func recordedVectors(t *testing.T, format Format, body []byte) [][]float32 {
	t.Helper()
	var rb struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Embeddings []struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(body, &rb); err != nil {
		return nil
	}
	if format == FormatGemini {
		out := make([][]float32, len(rb.Embeddings))
		for i, e := range rb.Embeddings {
			for _, f := range e.Values {
				out[i] = append(out[i], float32(f))
			}
		}
		return out
	}
	out := make([][]float32, len(rb.Data))
	for _, d := range rb.Data {
		var s string
		var v []float32
		if json.Unmarshal(d.Embedding, &s) == nil {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("recorded base64: %v", err)
			}
			for i := 0; i+4 <= len(b); i += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			}
		} else {
			var fs []float64
			if err := json.Unmarshal(d.Embedding, &fs); err != nil {
				t.Fatalf("recorded embedding: %v", err)
			}
			for _, f := range fs {
				v = append(v, float32(f))
			}
		}
		out[d.Index] = v
	}
	return out
}

func replayEmbed(t *testing.T, c *Client, ex fixture.Exchange, op opExchange) (llm.ResponseMeta, error) {
	want := recordedVectors(t, op.format, ex.Response.Body)
	in, dims := recordedInputs(ex, op.format, len(want))
	res, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: op.model, Inputs: in, Dimensions: dims})
	if err != nil {
		return llm.ResponseMeta{}, err
	}
	if len(res.Vectors) != len(want) || len(want) != len(in) {
		t.Fatalf("%d vectors for %d inputs; recorded %d", len(res.Vectors), len(in), len(want))
	}
	for i := range want {
		if len(res.Vectors[i]) != len(want[i]) || len(want[i]) == 0 {
			t.Fatalf("vector %d has %d dimensions, recorded %d", i, len(res.Vectors[i]), len(want[i]))
		}
		if dims > 0 && len(want[i]) != dims {
			t.Fatalf("recorded vector %d has %d dimensions for dimensions=%d", i, len(want[i]), dims)
		}
		for j := range want[i] {
			if res.Vectors[i][j] != want[i][j] {
				t.Fatalf("vector %d[%d] = %v, recorded %v", i, j, res.Vectors[i][j], want[i][j])
			}
		}
	}
	var rb struct {
		Model string `json:"model"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(ex.Response.Body, &rb)
	if rb.Model != res.Model {
		t.Errorf("model %q, recorded %q", res.Model, rb.Model)
	}
	if rb.Usage != nil && res.Usage.PromptTokens != rb.Usage.PromptTokens {
		t.Errorf("usage %+v, recorded prompt_tokens %d", res.Usage, rb.Usage.PromptTokens)
	}
	if rb.Usage == nil && !res.Usage.IsZero() {
		t.Errorf("usage %+v invented; none recorded", res.Usage)
	}
	return res.Meta, nil
}

func replayCount(t *testing.T, c *Client, ex fixture.Exchange, op opExchange) (llm.ResponseMeta, error) {
	req := &llm.ChatRequest{Model: op.model, Messages: []llm.Message{llm.UserText("replay")}}
	res, err := c.CountTokens(ctxT(t), req)
	if err != nil {
		return llm.ResponseMeta{}, err
	}
	var rb struct {
		InputTokens *int `json:"input_tokens"`
		TotalTokens *int `json:"totalTokens"`
	}
	if err := json.Unmarshal(ex.Response.Body, &rb); err != nil {
		t.Fatal(err)
	}
	want := rb.InputTokens
	if op.format == FormatGemini {
		want = rb.TotalTokens
	}
	if want == nil || res.InputTokens != *want {
		t.Fatalf("count %d, recorded %v", res.InputTokens, want)
	}
	return res.Meta, nil
}

func replayModels(t *testing.T, c *Client, ex fixture.Exchange, op opExchange) error {
	type rec struct {
		ID, DisplayName         string
		InputLimit, OutputLimit int
		ContextLength           int
		Methods                 []string
		Created                 int64
	}
	var rb struct {
		Data []struct {
			ID            string `json:"id"`
			Created       int64  `json:"created"`
			ContextLength int    `json:"context_length"`
		} `json:"data"`
		Models []struct {
			Name                       string   `json:"name"`
			DisplayName                string   `json:"displayName"`
			InputTokenLimit            int      `json:"inputTokenLimit"`
			OutputTokenLimit           int      `json:"outputTokenLimit"`
			SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
		NextPageToken string `json:"nextPageToken"`
		HasMore       bool   `json:"has_more"`
	}
	if ex.Response.Status/100 == 2 {
		if err := json.Unmarshal(ex.Response.Body, &rb); err != nil {
			t.Fatal(err)
		}
	}
	// One recorded page: a page that names a next one is replayed with a
	// one-page cap, and must then say so.
	more := rb.NextPageToken != "" || rb.HasMore
	if more {
		setVar(t, &MaxModelPages, 1)
	}
	models, err := c.ListModels(ctxT(t))
	if more {
		if !errors.Is(err, ErrModelListTruncated) {
			return fmt.Errorf("a page with a next page under a one-page cap: %w", err)
		}
		err = nil
	}
	if err != nil {
		return err
	}
	var want []rec
	for _, d := range rb.Data {
		want = append(want, rec{ID: d.ID, Created: d.Created, ContextLength: d.ContextLength})
	}
	for _, m := range rb.Models {
		want = append(want, rec{ID: strings.TrimPrefix(m.Name, "models/"), DisplayName: m.DisplayName, InputLimit: m.InputTokenLimit, OutputLimit: m.OutputTokenLimit, Methods: m.SupportedGenerationMethods})
	}
	if len(models) != len(want) || len(want) == 0 {
		t.Fatalf("%d models, recorded %d", len(models), len(want))
	}
	for i, w := range want {
		m := models[i]
		if m.ID != w.ID {
			t.Fatalf("model %d id %q, recorded %q", i, m.ID, w.ID)
		}
		switch op.format {
		case FormatGemini:
			if m.DisplayName != w.DisplayName || m.ContextWindow != w.InputLimit || m.MaxOutputTokens != w.OutputLimit ||
				strings.Join(m.Capabilities, ",") != strings.Join(w.Methods, ",") || !m.Created.IsZero() {
				t.Errorf("model %s: %+v, recorded %+v", w.ID, m, w)
			}
		case FormatOpenAI:
			wantCreated := time.Time{}
			if w.Created > 0 {
				wantCreated = time.Unix(w.Created, 0)
			}
			if !m.Created.Equal(wantCreated) || m.ContextWindow != w.ContextLength || m.MaxOutputTokens != 0 {
				t.Errorf("model %s: %+v, recorded %+v (unreported data must stay zero)", w.ID, m, w)
			}
		}
	}
	return nil
}

func replayTranscription(t *testing.T, c *Client, ex fixture.Exchange) (llm.ResponseMeta, error) {
	var rb struct {
		Text     string   `json:"text"`
		Language string   `json:"language"`
		Duration *float64 `json:"duration"`
		Segments []struct {
			Start, End float64
			Text       string
		} `json:"segments"`
	}
	if err := json.Unmarshal(ex.Response.Body, &rb); err != nil {
		t.Fatal(err)
	}
	format := llm.TranscriptionJSON
	if rb.Duration != nil || rb.Language != "" {
		format = llm.TranscriptionVerboseJSON
	}
	res, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "whisper-1", Audio: []byte("recorded audio"), MIMEType: "audio/mpeg", Format: format})
	if err != nil {
		return llm.ResponseMeta{}, err
	}
	if res.Text != rb.Text || res.Text == "" || res.Language != rb.Language || len(res.Segments) != len(rb.Segments) {
		t.Fatalf("%+v, recorded %+v", res, rb)
	}
	if rb.Duration != nil {
		if d := res.Duration.Seconds() - *rb.Duration; d > 1e-6 || d < -1e-6 {
			t.Fatalf("duration %v, recorded %vs", res.Duration, *rb.Duration)
		}
	}
	return res.Meta, nil
}
