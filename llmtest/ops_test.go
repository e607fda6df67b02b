package llmtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// do sends one request with headers and returns the answer.
func do(t *testing.T, c *http.Client, method, url, ctype string, body []byte, hdr map[string]string) result {
	t.Helper()
	start := time.Now()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return result{resp: resp, body: b, readErr: rerr, elapsed: time.Since(start)}
}

func decodeB64Floats(t *testing.T, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("bad base64 vector %q: %v", s, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestEmbeddingForIsDeterministic(t *testing.T) {
	a, b := llmtest.EmbeddingFor("hello", 0), llmtest.EmbeddingFor("hello", 0)
	if len(a) != llmtest.DefaultEmbeddingDimensions || !reflect.DeepEqual(a, b) {
		t.Fatalf("%v %v", a, b)
	}
	if reflect.DeepEqual(a, llmtest.EmbeddingFor("hellp", 0)) {
		t.Fatal("different texts, same vector")
	}
	for _, v := range llmtest.EmbeddingFor("range", 64) {
		if v < -1 || v >= 1 {
			t.Fatalf("value %v out of [-1,1)", v)
		}
	}
}

func TestOpenAIEmbeddings(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	url := srv.OpenAIBaseURL() + "/embeddings"

	r := post(t, c, url, `{"model":"text-embedding-3-small","input":["alpha","beta gamma","d"],"encoding_format":"base64","dimensions":5}`)
	if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("%d %s", r.resp.StatusCode, r.body)
	}
	var resp struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	inputs := []string{"alpha", "beta gamma", "d"}
	if len(resp.Data) != 3 || resp.Data[0].Index != 2 || resp.Model != "text-embedding-3-small" {
		t.Fatalf("data must be listed in reverse index order: %s", r.body)
	}
	for _, d := range resp.Data {
		var s string
		if err := json.Unmarshal(d.Embedding, &s); err != nil {
			t.Fatalf("base64 asked, got %s", d.Embedding)
		}
		if got := decodeB64Floats(t, s); !reflect.DeepEqual(got, llmtest.EmbeddingFor(inputs[d.Index], 5)) {
			t.Fatalf("index %d: %v", d.Index, got)
		}
	}
	tok := func(n int) int { return n/4 + 1 } // the server's token count for an n-byte input
	if want := tok(5) + tok(10) + tok(1); resp.Usage.PromptTokens != want {
		t.Fatalf("usage %d, want %d", resp.Usage.PromptTokens, want)
	}

	// Float arrays without encoding_format; a single string input.
	r = post(t, c, url, `{"model":"m","input":"solo"}`)
	var fl struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &fl); err != nil || len(fl.Data) != 1 || !reflect.DeepEqual(fl.Data[0].Embedding, llmtest.EmbeddingFor("solo", 0)) {
		t.Fatalf("%v %s", err, r.body)
	}

	// Scripted usage; limits enforced.
	srv.Push(llmtest.Respond(llmtest.Reply{Usage: &llm.Usage{PromptTokens: 77}}))
	r = post(t, c, url, `{"model":"m","input":["x"]}`)
	if !bytes.Contains(r.body, []byte(`"prompt_tokens":77`)) {
		t.Fatalf("%s", r.body)
	}
	many, _ := json.Marshal(map[string]any{"model": "m", "input": strings.Split(strings.Repeat("x,", 2049)[:2*2049-1], ",")})
	if r = post(t, c, url, string(many)); r.resp.StatusCode != 400 {
		t.Fatalf("2049 inputs: %d", r.resp.StatusCode)
	}
	if r = post(t, c, url, `{"model":"m","input":["a",""]}`); r.resp.StatusCode != 400 {
		t.Fatalf("empty input: %d", r.resp.StatusCode)
	}
	recs := srv.Requests()
	if recs[0].Format != llmtest.FormatOpenAI || recs[0].Model != "text-embedding-3-small" || recs[0].Path != "/v1/embeddings" {
		t.Fatalf("%+v", recs[0])
	}
}

func TestGeminiBatchEmbedContents(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	url := srv.GeminiBaseURL() + "/v1beta/models/gemini-embedding-001:batchEmbedContents"
	body := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"one"}]},"outputDimensionality":3},
		{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"two"}]},"outputDimensionality":3}]}`
	r := post(t, c, url, body)
	var resp struct {
		Embeddings []struct {
			Values []float32 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.Embeddings) != 2 ||
		!reflect.DeepEqual(resp.Embeddings[0].Values, llmtest.EmbeddingFor("one", 3)) || !reflect.DeepEqual(resp.Embeddings[1].Values, llmtest.EmbeddingFor("two", 3)) {
		t.Fatalf("%v %s", err, r.body)
	}
	if r := post(t, c, url, `{"requests":[{"model":"models/other","content":{"parts":[{"text":"x"}]}}]}`); r.resp.StatusCode != 400 || !bytes.Contains(r.body, []byte("INVALID_ARGUMENT")) {
		t.Fatalf("model mismatch: %d %s", r.resp.StatusCode, r.body)
	}
	reqs := make([]string, 101)
	for i := range reqs {
		reqs[i] = `{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"x"}]}}`
	}
	if r := post(t, c, url, `{"requests":[`+strings.Join(reqs, ",")+`]}`); r.resp.StatusCode != 400 {
		t.Fatalf("101 requests: %d", r.resp.StatusCode)
	}
	if rec := srv.Requests()[0]; rec.Format != llmtest.FormatGemini || rec.Model != "gemini-embedding-001" {
		t.Fatalf("%+v", rec)
	}
}

func TestSpeech(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	r := post(t, c, srv.OpenAIBaseURL()+"/audio/speech", `{"model":"gpt-4o-mini-tts","input":"Hello","voice":"alloy","response_format":"wav"}`)
	if r.resp.StatusCode != 200 || r.resp.Header.Get("Content-Type") != "audio/wav" || !bytes.Equal(r.body, llmtest.SpeechAudio("Hello", "wav")) {
		t.Fatalf("%d %q %q", r.resp.StatusCode, r.resp.Header.Get("Content-Type"), r.body)
	}
	srv.Push(llmtest.Respond(llmtest.Reply{Header: map[string]string{"Content-Type": "audio/x-custom"}}))
	r = post(t, c, srv.OpenAIBaseURL()+"/audio/speech", `{"model":"m","input":"Hi"}`)
	if r.resp.Header.Get("Content-Type") != "audio/x-custom" || !bytes.Equal(r.body, llmtest.SpeechAudio("Hi", "mp3")) {
		t.Fatalf("%q %q", r.resp.Header.Get("Content-Type"), r.body)
	}
	if r := post(t, c, srv.OpenAIBaseURL()+"/audio/speech", `{"model":"m","input":"Hi","response_format":"ogg-vorbis"}`); r.resp.StatusCode != 400 {
		t.Fatalf("bad format: %d", r.resp.StatusCode)
	}

	// Gemini: AUDIO modality answers inlineData; without it, chat as usual.
	gurl := srv.GeminiBaseURL() + "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent"
	r = post(t, c, gurl, `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}],"generationConfig":{"responseModalities":["AUDIO"],"speechConfig":{"voiceConfig":{"prebuiltVoiceConfig":{"voiceName":"Kore"}}}}}`)
	var g struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					InlineData struct {
						MimeType string `json:"mimeType"`
						Data     []byte `json:"data"`
					} `json:"inlineData"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
		ModelVersion string `json:"modelVersion"`
	}
	if err := json.Unmarshal(r.body, &g); err != nil || len(g.Candidates) != 1 || g.Candidates[0].Content.Parts[0].InlineData.MimeType != "audio/L16;codec=pcm;rate=24000" ||
		!bytes.Equal(g.Candidates[0].Content.Parts[0].InlineData.Data, llmtest.SpeechAudio("Say hi", "pcm")) || g.ModelVersion != "gemini-2.5-flash-preview-tts" {
		t.Fatalf("%v %s", err, r.body)
	}
	r = post(t, c, gurl, `{"contents":[{"role":"user","parts":[{"text":"Say hi"}]}]}`)
	if !bytes.Contains(r.body, []byte(`"text":"simulated reply"`)) {
		t.Fatalf("a chat request must still be chat: %s", r.body)
	}
}

func multipartBody(t *testing.T, fields map[string]string, file []byte, name string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", name)
		_, _ = fw.Write(file)
	}
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

func TestTranscription(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	url := srv.OpenAIBaseURL() + "/audio/transcriptions"
	audio := []byte("RIFF0000WAVEfmt ")

	body, ct := multipartBody(t, map[string]string{"model": "whisper-1", "response_format": "text"}, audio, "a.wav")
	srv.Push(llmtest.Text("the quick brown fox jumps"))
	r := do(t, c, "POST", url, ct, body, nil)
	if r.resp.StatusCode != 200 || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "text/plain") || string(r.body) != "the quick brown fox jumps\n" {
		t.Fatalf("%d %q %q", r.resp.StatusCode, r.resp.Header.Get("Content-Type"), r.body)
	}
	if rec := srv.Requests()[0]; rec.Model != "whisper-1" || rec.Format != llmtest.FormatOpenAI {
		t.Fatalf("%+v", rec)
	}

	body, ct = multipartBody(t, map[string]string{"model": "whisper-1"}, audio, "a.wav")
	r = do(t, c, "POST", url, ct, body, nil)
	if string(r.body) != `{"text":"simulated reply","usage":{"seconds":1,"type":"duration"}}` {
		t.Fatalf("json: %s", r.body)
	}

	body, ct = multipartBody(t, map[string]string{"model": "whisper-1", "response_format": "verbose_json", "language": "fr"}, audio, "a.wav")
	srv.Push(llmtest.Text("un deux trois quatre"))
	r = do(t, c, "POST", url, ct, body, nil)
	var v struct {
		Language string  `json:"language"`
		Duration float64 `json:"duration"`
		Text     string  `json:"text"`
		Segments []struct {
			Start, End float64
			Text       string
		} `json:"segments"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || v.Language != "fr" || v.Duration != 2 || v.Text != "un deux trois quatre" ||
		len(v.Segments) != 2 || v.Segments[1].Start != 1.5 || v.Segments[1].End != 2 || v.Segments[1].Text != " quatre" {
		t.Fatalf("%v %s", err, r.body)
	}

	for name, b := range map[string]func() ([]byte, string){
		"no file":  func() ([]byte, string) { return multipartBody(t, map[string]string{"model": "m"}, nil, "") },
		"no model": func() ([]byte, string) { return multipartBody(t, nil, audio, "a.wav") },
		"srt": func() ([]byte, string) {
			return multipartBody(t, map[string]string{"model": "m", "response_format": "srt"}, audio, "a.wav")
		},
	} {
		body, ct := b()
		if r := do(t, c, "POST", url, ct, body, nil); r.resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", name, r.resp.StatusCode, r.body)
		}
	}
	if r := do(t, c, "POST", url, "application/json", []byte(`{}`), nil); r.resp.StatusCode != 400 {
		t.Fatalf("json body: %d", r.resp.StatusCode)
	}
}

func TestCountTokens(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	an := map[string]string{"Anthropic-Version": "2023-06-01", "X-Api-Key": "k"}
	body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"What is 2 + 2?"}]}`
	r := do(t, c, "POST", srv.AnthropicBaseURL()+"/v1/messages/count_tokens", "application/json", []byte(body), an)
	if string(r.body) != fmt.Sprintf(`{"input_tokens":%d}`, len(body)/4) || r.resp.Header.Get("Request-Id") == "" {
		t.Fatalf("%s", r.body)
	}
	srv.Push(llmtest.Respond(llmtest.Reply{Usage: &llm.Usage{PromptTokens: 10, CacheReadTokens: 5}}))
	r = do(t, c, "POST", srv.AnthropicBaseURL()+"/v1/messages/count_tokens", "application/json", []byte(body), an)
	if string(r.body) != `{"input_tokens":15}` {
		t.Fatalf("%s", r.body)
	}
	bad := `{"model":"m","max_tokens":10,"messages":[]}`
	if r := do(t, c, "POST", srv.AnthropicBaseURL()+"/v1/messages/count_tokens", "application/json", []byte(bad), an); r.resp.StatusCode != 400 || !bytes.Contains(r.body, []byte("max_tokens")) {
		t.Fatalf("max_tokens accepted: %d %s", r.resp.StatusCode, r.body)
	}

	gurl := srv.GeminiBaseURL() + "/v1beta/models/gemini-2.5-flash:countTokens"
	gbody := `{"generateContentRequest":{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"hi"}]}]}}`
	r = post(t, c, gurl, gbody)
	if !bytes.Contains(r.body, []byte(fmt.Sprintf(`"totalTokens":%d`, len(gbody)/4))) {
		t.Fatalf("%s", r.body)
	}
	if r := post(t, c, gurl, `{"contents":[{"parts":[{"text":"hi"}]}]}`); r.resp.StatusCode != 200 {
		t.Fatalf("contents form: %d", r.resp.StatusCode)
	}
	if r := post(t, c, gurl, `{"generateContentRequest":{"model":"models/other","contents":[]}}`); r.resp.StatusCode != 400 {
		t.Fatalf("model mismatch: %d", r.resp.StatusCode)
	}
}

func TestModelListsPaginate(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	models := []llmtest.Model{
		{ID: "m1", DisplayName: "M One", Created: time.Unix(1700000000, 0), ContextWindow: 1000, MaxOutputTokens: 100, Capabilities: []string{"generateContent"}},
		{ID: "m2"}, {ID: "m3"}, {ID: "m4"}, {ID: "m5"},
	}
	srv.SetModels(2, models...)

	// OpenAI: has_more / last_id / ?after=.
	var ids []string
	after := ""
	for page := 0; page < 10; page++ {
		u := srv.OpenAIBaseURL() + "/models"
		if after != "" {
			u += "?after=" + after
		}
		r := do(t, c, "GET", u, "", nil, map[string]string{"Authorization": "Bearer k"})
		var p struct {
			Data []map[string]any `json:"data"`
			More bool             `json:"has_more"`
			Last string           `json:"last_id"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("%v %s", err, r.body)
		}
		if page == 0 && (p.Data[0]["context_length"] != 1000.0 || p.Data[0]["created"] != 1700000000.0 || p.Data[1]["context_length"] != nil) {
			t.Fatalf("fields: %s", r.body)
		}
		for _, d := range p.Data {
			ids = append(ids, d["id"].(string))
		}
		if !p.More {
			break
		}
		after = p.Last
	}
	if strings.Join(ids, ",") != "m1,m2,m3,m4,m5" {
		t.Fatalf("openai pages: %v", ids)
	}

	// Anthropic: limit/after_id/has_more/last_id.
	ids, after = nil, ""
	an := map[string]string{"Anthropic-Version": "2023-06-01", "X-Api-Key": "k"}
	for page := 0; page < 10; page++ {
		u := srv.AnthropicBaseURL() + "/v1/models?limit=100"
		if after != "" {
			u += "&after_id=" + after
		}
		r := do(t, c, "GET", u, "", nil, an)
		var p struct {
			Data []struct {
				ID, DisplayName, CreatedAt string
			} `json:"data"`
			More bool   `json:"has_more"`
			Last string `json:"last_id"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || len(p.Data) > 2 {
			t.Fatalf("%v %s", err, r.body)
		}
		for _, d := range p.Data {
			ids = append(ids, d.ID)
		}
		if !p.More {
			break
		}
		after = p.Last
	}
	if strings.Join(ids, ",") != "m1,m2,m3,m4,m5" {
		t.Fatalf("anthropic pages: %v", ids)
	}

	// Gemini: pageSize/pageToken/nextPageToken; a fault is consumed by one page.
	ids = nil
	tok := ""
	srv.Push(llmtest.Step{}, llmtest.Status(503, 0))
	for page := 0; page < 10; page++ {
		u := srv.GeminiBaseURL() + "/v1beta/models?pageSize=100"
		if tok != "" {
			u += "&pageToken=" + tok
		}
		r := do(t, c, "GET", u, "", nil, nil)
		if r.resp.StatusCode == 503 {
			continue // the scripted fault on the second page; ask again
		}
		var p struct {
			Models []struct {
				Name                       string   `json:"name"`
				InputTokenLimit            int      `json:"inputTokenLimit"`
				SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
			} `json:"models"`
			Next string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("%v %s", err, r.body)
		}
		for _, m := range p.Models {
			ids = append(ids, m.Name)
		}
		if page == 0 && (p.Models[0].InputTokenLimit != 1000 || p.Models[0].SupportedGenerationMethods[0] != "generateContent") {
			t.Fatalf("%s", r.body)
		}
		if p.Next == "" {
			break
		}
		tok = p.Next
	}
	if strings.Join(ids, ",") != "models/m1,models/m2,models/m3,models/m4,models/m5" || srv.Pending() != 0 {
		t.Fatalf("gemini pages: %v (pending %d)", ids, srv.Pending())
	}
	if r := do(t, c, "GET", srv.GeminiBaseURL()+"/v1beta/models?pageToken=garbage", "", nil, nil); r.resp.StatusCode != 400 {
		t.Fatalf("bad token: %d", r.resp.StatusCode)
	}
	if r := do(t, c, "POST", srv.GeminiBaseURL()+"/v1beta/models", "", nil, nil); r.resp.StatusCode != 405 {
		t.Fatalf("POST models: %d", r.resp.StatusCode)
	}
}

func TestDefaultModels(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	r := do(t, newClient(t), "GET", srv.OpenAIBaseURL()+"/models", "", nil, nil)
	var p struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		More *bool `json:"has_more"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || len(p.Data) != len(llmtest.DefaultModels) || p.More != nil {
		t.Fatalf("%v %s", err, r.body)
	}
}

func TestOpFaults(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t)
	url := srv.OpenAIBaseURL() + "/embeddings"
	body := `{"model":"m","input":["a"]}`

	srv.Push(llmtest.Status(429, 2*time.Second))
	r := post(t, c, url, body)
	if r.resp.StatusCode != 429 || r.resp.Header.Get("Retry-After") != "2" || r.resp.Header.Get("Retry-After-Ms") != "2000" || srv.RateLimited() != 1 {
		t.Fatalf("%d %v", r.resp.StatusCode, r.resp.Header)
	}

	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultPrematureClose}))
	r = post(t, c, url, body)
	if r.readErr == nil {
		t.Fatal("premature close read cleanly")
	}

	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultInStreamError, Status: 500}))
	r = post(t, c, url, body)
	if r.resp.StatusCode != 200 || !bytes.Contains(r.body, []byte(`"error"`)) {
		t.Fatalf("%d %s", r.resp.StatusCode, r.body)
	}

	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultMalformedLine}))
	if r = post(t, c, url, body); string(r.body) != "{not json" {
		t.Fatalf("%s", r.body)
	}

	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultResetBeforeHeaders}))
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("reset before headers answered")
	}

	// A stall holds the answer; the client's deadline ends it.
	srv.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 5 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "POST", srv.GeminiBaseURL()+"/v1beta/models/e:batchEmbedContents", strings.NewReader(`{"requests":[{"model":"models/e","content":{"parts":[{"text":"a"}]}}]}`))
	start := time.Now()
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("stall answered")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("stall was not cut by the client")
	}
	if srv.Pending() != 0 {
		t.Fatalf("%d steps left", srv.Pending())
	}
}

func TestOpRateLimitEmulation(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithRateLimit(llmtest.RateLimit{Requests: 1, Window: time.Minute}))
	defer srv.Close()
	c := newClient(t)
	r := post(t, c, srv.OpenAIBaseURL()+"/embeddings", `{"model":"m","input":["a"]}`)
	if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Ratelimit-Limit-Requests") != "1" {
		t.Fatalf("%d %v", r.resp.StatusCode, r.resp.Header)
	}
	if r = post(t, c, srv.OpenAIBaseURL()+"/embeddings", `{"model":"m","input":["a"]}`); r.resp.StatusCode != 429 || r.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d", r.resp.StatusCode)
	}
}
