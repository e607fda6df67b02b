package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/openai"
)

// opFormat returns the config of one format from formats(srv).
func opFormat(srv *llmtest.Server, f Format) Config {
	for _, c := range formats(srv) {
		if c.Format == f {
			return c
		}
	}
	panic("no format " + string(f))
}

// setVar sets *p to v for the test.
func setVar[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

func embedInputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("input number %d", i)
	}
	return out
}

func TestEmbedEveryFormat(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	var obs attempts
	for _, f := range []Format{FormatOpenAI, FormatGemini} {
		c := newClient(t, opFormat(srv, f), WithAttemptObserver(obs.observe))
		in := []string{"alpha", "beta"}
		res, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: "embed-model", Inputs: in, Dimensions: 6})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, s := range in {
			if !reflect.DeepEqual(res.Vectors[i], llmtest.EmbeddingFor(s, 6)) {
				t.Fatalf("%s: vector %d = %v", f, i, res.Vectors[i])
			}
		}
		if res.Meta.Provider != string(f) || res.Meta.Status != 200 || res.Meta.Attempts != 1 {
			t.Fatalf("%s meta %+v", f, res.Meta)
		}
		if f == FormatOpenAI && (res.Model != "embed-model" || res.Usage.PromptTokens != embedTokens(5)+embedTokens(4) || res.Meta.RequestID == "") {
			t.Fatalf("openai %+v", res)
		}
		if f == FormatGemini && !res.Usage.IsZero() {
			t.Fatalf("gemini reports no usage; got %+v", res.Usage)
		}
	}
	for _, ev := range obs.all() {
		if ev.Op != "embed" || ev.Model != "embed-model" {
			t.Fatalf("attempt event %+v", ev)
		}
	}
	before := srv.Count()
	c := newClient(t, opFormat(srv, FormatAnthropic))
	_, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: "m", Inputs: []string{"x"}})
	var ue *llm.UnsupportedError
	if !errors.Is(err, llm.ErrUnsupported) || !errors.As(err, &ue) || ue.Op != "embed" || srv.Count() != before {
		t.Fatalf("anthropic embed: %v (requests %d -> %d)", err, before, srv.Count())
	}
	var ce *llm.ConfigError
	if _, err := newClient(t, opFormat(srv, FormatOpenAI)).Embed(ctxT(t), &llm.EmbedRequest{Model: "m"}); !errors.As(err, &ce) || srv.Count() != before {
		t.Fatalf("empty inputs: %v", err)
	}
}

// TestEmbedBatchesReassembleInOrder: more inputs than the batch size are
// split, sent in order, retried per batch, and reassembled in input order
// with usage summed.
func TestEmbedBatchesReassembleInOrder(t *testing.T) {
	setVar(t, &openai.EmbedBatchSize, 3)
	setVar(t, &gemini.EmbedBatchSize, 2)
	in := embedInputs(7)
	for _, tc := range []struct {
		f       Format
		batches int
	}{{FormatOpenAI, 3}, {FormatGemini, 4}} {
		srv := llmtest.NewServer()
		c := newClient(t, opFormat(srv, tc.f))
		// The second batch fails once and is retried.
		srv.Push(llmtest.Step{}, llmtest.Status(503, 0))
		res, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: "e", Inputs: in})
		if err != nil {
			t.Fatalf("%s: %v", tc.f, err)
		}
		if len(res.Vectors) != len(in) {
			t.Fatalf("%s: %d vectors", tc.f, len(res.Vectors))
		}
		for i, s := range in {
			if !reflect.DeepEqual(res.Vectors[i], llmtest.EmbeddingFor(s, 0)) {
				t.Fatalf("%s: vector %d is not the vector of input %d", tc.f, i, i)
			}
		}
		if got := srv.Count(); got != tc.batches+1 || res.Meta.Attempts != tc.batches+1 {
			t.Fatalf("%s: %d requests, %d attempts; want %d", tc.f, got, res.Meta.Attempts, tc.batches+1)
		}
		// Each batch carried its own slice of the inputs, in order; the
		// failed second batch was sent again as is.
		var batches [][]string
		for _, r := range srv.Requests() {
			var body struct {
				Input    []string `json:"input"`
				Requests []struct {
					Content struct {
						Parts []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"content"`
				} `json:"requests"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			b := body.Input
			for _, rq := range body.Requests {
				b = append(b, rq.Content.Parts[0].Text)
			}
			batches = append(batches, b)
		}
		if !reflect.DeepEqual(batches[1], batches[2]) {
			t.Fatalf("%s: the retry sent another batch: %v", tc.f, batches)
		}
		var sent []string
		for i, b := range batches {
			if i != 2 {
				sent = append(sent, b...)
			}
		}
		if !reflect.DeepEqual(sent, in) || len(batches[0]) != map[Format]int{FormatOpenAI: 3, FormatGemini: 2}[tc.f] {
			t.Fatalf("%s: batches %v", tc.f, batches)
		}
		if tc.f == FormatOpenAI {
			wantTokens := 0
			for _, s := range in {
				wantTokens += len(s)/4 + 1
			}
			if res.Usage.PromptTokens != wantTokens {
				t.Fatalf("usage %d, want the sum over batches %d", res.Usage.PromptTokens, wantTokens)
			}
		}
		srv.Close()
	}
}

// TestEmbedDecodesBase64AndFloats: the client asks for base64 and decodes
// little-endian float32; a gateway that ignores encoding_format and sends
// float arrays, out of index order, works too.
func TestEmbedDecodesBase64AndFloats(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, opFormat(srv, FormatOpenAI))
	if _, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: "e", Inputs: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(srv.Requests()[0].Body, []byte(`"encoding_format":"base64"`)) {
		t.Fatalf("base64 not requested: %s", srv.Requests()[0].Body)
	}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[{"index":1,"embedding":[0.25,0.5]},{"index":0,"embedding":[-1,2.5]}],"model":"gw","usage":{"prompt_tokens":3,"total_tokens":3}}`))
	}))
	defer gw.Close()
	gc := newClient(t, Config{ID: "gw", Format: FormatOpenAI, BaseURL: gw.URL, APIKey: testKey})
	res, err := gc.Embed(ctxT(t), &llm.EmbedRequest{Model: "e", Inputs: []string{"a", "b"}})
	if err != nil || !reflect.DeepEqual(res.Vectors, [][]float32{{-1, 2.5}, {0.25, 0.5}}) || res.Usage.PromptTokens != 3 || res.Model != "gw" {
		t.Fatalf("%+v %v", res, err)
	}
	// A server answering fewer vectors than inputs is a decode error, not a silent gap.
	short := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[1]}]}`))
	}))
	defer short.Close()
	sc := newClient(t, Config{ID: "short", Format: FormatOpenAI, BaseURL: short.URL, APIKey: testKey})
	var de *llm.DecodeError
	if _, err := sc.Embed(ctxT(t), &llm.EmbedRequest{Model: "e", Inputs: []string{"a", "b"}}); !errors.As(err, &de) || de.Provider != "short" {
		t.Fatalf("got %v", err)
	}
}

func TestSpeakEveryFormat(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, opFormat(srv, FormatOpenAI))
	res, err := c.Speak(ctxT(t), &llm.SpeechRequest{Model: "tts-1", Input: "Hello there", Voice: "alloy", Format: "flac"})
	if err != nil || !bytes.Equal(res.Audio, llmtest.SpeechAudio("Hello there", "flac")) || res.MIMEType != "audio/flac" || res.Meta.RequestID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	srv.Push(llmtest.Respond(llmtest.Reply{Header: map[string]string{"Content-Type": "audio/mpeg; charset=binary"}}))
	if res, err := c.Speak(ctxT(t), &llm.SpeechRequest{Model: "tts-1", Input: "x"}); err != nil || res.MIMEType != "audio/mpeg; charset=binary" {
		t.Fatalf("content type not as sent: %+v %v", res, err)
	}
	g := newClient(t, opFormat(srv, FormatGemini))
	res, err = g.Speak(ctxT(t), &llm.SpeechRequest{Model: "gemini-2.5-flash-preview-tts", Input: "Hi", Voice: "Kore"})
	if err != nil || !bytes.Equal(res.Audio, llmtest.SpeechAudio("Hi", "pcm")) || res.MIMEType != "audio/L16;codec=pcm;rate=24000" || res.Meta.Model != "gemini-2.5-flash-preview-tts" {
		t.Fatalf("%+v %v", res, err)
	}
	last := srv.Requests()[srv.Count()-1]
	if !bytes.Contains(last.Body, []byte(`"responseModalities":["AUDIO"]`)) || !bytes.Contains(last.Body, []byte(`"voiceName":"Kore"`)) {
		t.Fatalf("%s", last.Body)
	}
	before := srv.Count()
	if _, err := newClient(t, opFormat(srv, FormatAnthropic)).Speak(ctxT(t), &llm.SpeechRequest{Model: "m", Input: "x"}); !errors.Is(err, llm.ErrUnsupported) || srv.Count() != before {
		t.Fatalf("anthropic speech: %v", err)
	}
	var ce *llm.ConfigError
	if _, err := g.Speak(ctxT(t), &llm.SpeechRequest{Model: "m", Input: "x", Format: "mp3"}); !errors.As(err, &ce) || srv.Count() != before {
		t.Fatalf("gemini mp3: %v", err)
	}
}

func TestTranscribe(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, opFormat(srv, FormatOpenAI))
	audio := []byte("ID3\x04fake mp3 bytes")
	srv.Push(llmtest.Text("one two three four five"))
	res, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "whisper-1", Audio: audio, MIMEType: "audio/mpeg", Language: "en", Format: llm.TranscriptionVerboseJSON})
	if err != nil || res.Text != "one two three four five" || res.Language != "en" || res.Duration != 2500*time.Millisecond || len(res.Segments) != 2 ||
		res.Segments[1] != (llm.Segment{Start: 1500 * time.Millisecond, End: 2500 * time.Millisecond, Text: " four five"}) || res.Meta.RequestID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	if ct := srv.Requests()[0].Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/form-data; boundary=") {
		t.Fatalf("content type %q", ct)
	}
	srv.Push(llmtest.Text("plain words"))
	if res, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "whisper-1", Audio: audio, Format: llm.TranscriptionText}); err != nil || res.Text != "plain words" {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "whisper-1", Audio: audio}); err != nil || res.Text != "simulated reply" || res.Language != "" || res.Duration != 0 {
		t.Fatalf("json leaves verbose fields zero: %+v %v", res, err)
	}

	// The 25 MB cap: a ConfigError and nothing sent.
	before := srv.Count()
	big := make([]byte, llm.MaxTranscriptionBytes+1)
	var ce *llm.ConfigError
	if _, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "whisper-1", Audio: big}); !errors.As(err, &ce) || ce.Field != "audio" || srv.Count() != before {
		t.Fatalf("cap: %v, %d requests sent", err, srv.Count()-before)
	}
	for _, f := range []Format{FormatAnthropic, FormatGemini} {
		if _, err := newClient(t, opFormat(srv, f)).Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "m", Audio: audio}); !errors.Is(err, llm.ErrUnsupported) || srv.Count() != before {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func TestCountTokens(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	req := &llm.ChatRequest{Model: "count-model", Messages: []llm.Message{llm.SystemText("sys"), llm.UserText("hello")}, MaxTokens: 100, Temperature: llm.Ptr(0.3)}
	var obs attempts
	for _, f := range []Format{FormatAnthropic, FormatGemini} {
		c := newClient(t, opFormat(srv, f), WithAttemptObserver(obs.observe))
		srv.Push(llmtest.Respond(llmtest.Reply{Usage: &llm.Usage{PromptTokens: 40, CacheReadTokens: 2}}))
		res, err := c.CountTokens(ctxT(t), req)
		if err != nil || res.InputTokens != 42 || res.Meta.Status != 200 {
			t.Fatalf("%s: %+v %v", f, res, err)
		}
		// Unscripted: the fake counts len(body)/4 of what was sent.
		res, err = c.CountTokens(ctxT(t), req)
		last := srv.Requests()[srv.Count()-1]
		if err != nil || res.InputTokens != len(last.Body)/4 {
			t.Fatalf("%s: %+v %v", f, res, err)
		}
	}
	if evs := obs.all(); len(evs) != 4 || evs[0].Op != "count_tokens" {
		t.Fatalf("%+v", evs)
	}
	before := srv.Count()
	_, err := newClient(t, opFormat(srv, FormatOpenAI)).CountTokens(ctxT(t), req)
	var ue *llm.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, llm.ErrUnsupported) || ue.Op != "count_tokens" || ue.Provider != "openai" || srv.Count() != before {
		t.Fatalf("openai count: %v, %d requests sent", err, srv.Count()-before)
	}
	var ce *llm.ConfigError
	if _, err := newClient(t, opFormat(srv, FormatAnthropic)).CountTokens(ctxT(t), &llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "bot", Content: "x"}}}); !errors.As(err, &ce) || srv.Count() != before {
		t.Fatalf("unknown role: %v", err)
	}
	// A provider error is typed, with the status.
	srv.Push(llmtest.Fail(llmtest.Fault{Status: 404, Message: "model: nope"}))
	var api *llm.APIError
	if _, err := newClient(t, opFormat(srv, FormatAnthropic)).CountTokens(ctxT(t), req); !errors.As(err, &api) || api.Status != 404 || api.Retryable {
		t.Fatalf("404: %v", err)
	}
}

var fakeModels = []llmtest.Model{
	{ID: "m1", DisplayName: "Model One", Created: time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC), ContextWindow: 200000, MaxOutputTokens: 64000, Capabilities: []string{"generateContent", "countTokens"}},
	{ID: "m2"}, {ID: "m3", ContextWindow: 8192}, {ID: "m4"}, {ID: "m5"},
}

func TestListModelsPaginates(t *testing.T) {
	for _, f := range []Format{FormatOpenAI, FormatAnthropic, FormatGemini} {
		srv := llmtest.NewServer()
		srv.SetModels(2, fakeModels...)
		var obs attempts
		c := newClient(t, opFormat(srv, f), WithAttemptObserver(obs.observe))
		models, err := c.ListModels(ctxT(t))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var ids []string
		for _, m := range models {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != "m1,m2,m3,m4,m5" || srv.Count() != 3 {
			t.Fatalf("%s: %v in %d requests", f, ids, srv.Count())
		}
		m := models[0]
		if m.ContextWindow != 200000 || m.MaxOutputTokens != 64000 || m.DisplayName != "Model One" {
			t.Fatalf("%s: %+v", f, m)
		}
		if f == FormatGemini && !reflect.DeepEqual(m.Capabilities, []string{"generateContent", "countTokens"}) {
			t.Fatalf("gemini capabilities %v", m.Capabilities)
		}
		if f != FormatGemini && !m.Created.Equal(fakeModels[0].Created) {
			t.Fatalf("%s created %v", f, m.Created)
		}
		if z := models[1]; z.ContextWindow != 0 || z.MaxOutputTokens != 0 || (f != FormatAnthropic && z.DisplayName != "") || !z.Created.IsZero() || z.Capabilities != nil {
			t.Fatalf("%s: unreported data must stay zero: %+v", f, z)
		}
		for _, ev := range obs.all() {
			if ev.Op != "list_models" {
				t.Fatalf("%+v", ev)
			}
		}
		srv.Close()
	}
}

func TestListModelsPageCap(t *testing.T) {
	setVar(t, &MaxModelPages, 2)
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.SetModels(2, fakeModels...)
	c := newClient(t, opFormat(srv, FormatGemini))
	models, err := c.ListModels(ctxT(t))
	if !errors.Is(err, ErrModelListTruncated) || len(models) != 4 || srv.Count() != 2 {
		t.Fatalf("%d models, %v, %d requests", len(models), err, srv.Count())
	}
	// A truncated list is not cached.
	if _, err := c.ListModels(ctxT(t)); !errors.Is(err, ErrModelListTruncated) || srv.Count() != 4 {
		t.Fatalf("%v after %d requests", err, srv.Count())
	}
}

func TestListModelsCacheTTLAndCopies(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	c := newClient(t, opFormat(srv, FormatGemini), WithModelCacheTTL(200*time.Millisecond))
	a, err := c.ListModels(ctxT(t))
	if err != nil || len(a) != len(llmtest.DefaultModels) {
		t.Fatalf("%v %v", a, err)
	}
	a[0].ID = "changed"
	a[0].Capabilities[0] = "changed"
	b, err := c.ListModels(ctxT(t))
	if err != nil || srv.Count() != 1 {
		t.Fatalf("cached call sent a request: %d", srv.Count())
	}
	if b[0].ID != "llmtest-model" || b[0].Capabilities[0] != "generateContent" {
		t.Fatalf("cache shared with a caller: %+v", b[0])
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := c.ListModels(ctxT(t)); err != nil || srv.Count() != 2 {
		t.Fatalf("expired cache: %v, %d requests", err, srv.Count())
	}
	// Errors are not cached; the next call fetches again.
	nc := newClient(t, opFormat(srv, FormatOpenAI), WithRetryPolicy(RetryPolicy{MaxAttempts: 1}))
	srv.Push(llmtest.Status(500, 0))
	if _, err := nc.ListModels(ctxT(t)); err == nil {
		t.Fatal("500 not reported")
	}
	if _, err := nc.ListModels(ctxT(t)); err != nil || srv.Count() != 4 {
		t.Fatalf("%v %d", err, srv.Count())
	}
	// An empty list is cached too.
	srv2 := llmtest.NewServer()
	defer srv2.Close()
	srv2.SetModels(0)
	ec := newClient(t, opFormat(srv2, FormatAnthropic))
	for i := 0; i < 2; i++ {
		if m, err := ec.ListModels(ctxT(t)); err != nil || m == nil || len(m) != 0 || srv2.Count() != 1 {
			t.Fatalf("empty list: %v %v %d", m, err, srv2.Count())
		}
	}
	// TTL off: every call fetches.
	off := newClient(t, opFormat(srv2, FormatAnthropic), WithModelCacheTTL(0))
	off.ListModels(ctxT(t))
	off.ListModels(ctxT(t))
	if srv2.Count() != 3 {
		t.Fatalf("TTL 0 cached: %d", srv2.Count())
	}
}

// TestListModelsSharedFetch: concurrent callers share one fetch; a caller
// that gives up does not cancel it for the others.
func TestListModelsSharedFetch(t *testing.T) {
	srv := llmtest.NewServer(llmtest.WithLatency(300*time.Millisecond, 0))
	defer srv.Close()
	c := newClient(t, opFormat(srv, FormatOpenAI))
	const n = 16
	var wg sync.WaitGroup
	results := make([][]llm.ModelInfo, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = c.ListModels(ctxT(t))
		}(i)
	}
	// One impatient caller leaves early.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := c.ListModels(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient caller: %v", err)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		if errs[i] != nil || len(results[i]) != len(llmtest.DefaultModels) {
			t.Fatalf("caller %d: %v %v", i, results[i], errs[i])
		}
	}
	if srv.Count() != 1 {
		t.Fatalf("%d fetches for %d concurrent callers", srv.Count(), n+1)
	}
	results[0][0].ID = "mutated"
	if results[1][0].ID != "llmtest-model" {
		t.Fatal("callers share one slice")
	}
	// When every caller leaves, the fetch is cancelled and the next caller starts afresh.
	c2 := newClient(t, opFormat(srv, FormatOpenAI))
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = c2.ListModels(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	if m, err := c2.ListModels(ctxT(t)); err != nil || len(m) != len(llmtest.DefaultModels) {
		t.Fatalf("after an abandoned fetch: %v %v", m, err)
	}
}

// opCase is one entry point on one format.
type opCase struct {
	name string
	f    Format
	call func(ctx context.Context, c *Client) error
}

// opCases lists every non-chat entry point on every format that offers it.
func opCases() []opCase {
	embed := func(ctx context.Context, c *Client) error {
		_, err := c.Embed(ctx, &llm.EmbedRequest{Model: "e", Inputs: []string{"a", "b"}})
		return err
	}
	speak := func(ctx context.Context, c *Client) error {
		_, err := c.Speak(ctx, &llm.SpeechRequest{Model: "tts", Input: "hi"})
		return err
	}
	transcribe := func(ctx context.Context, c *Client) error {
		_, err := c.Transcribe(ctx, &llm.TranscriptionRequest{Model: "stt", Audio: []byte("audio")})
		return err
	}
	count := func(ctx context.Context, c *Client) error {
		_, err := c.CountTokens(ctx, hello())
		return err
	}
	list := func(ctx context.Context, c *Client) error {
		_, err := c.ListModels(ctx)
		return err
	}
	return []opCase{
		{"Embed", FormatOpenAI, embed}, {"Embed", FormatGemini, embed},
		{"Speak", FormatOpenAI, speak}, {"Speak", FormatGemini, speak},
		{"Transcribe", FormatOpenAI, transcribe},
		{"CountTokens", FormatAnthropic, count}, {"CountTokens", FormatGemini, count},
		{"ListModels", FormatOpenAI, list}, {"ListModels", FormatAnthropic, list}, {"ListModels", FormatGemini, list},
	}
}

// TestInvariant10_WholeCallBudgetEveryOperation: on every non-chat entry
// point, retries and their waits share the one call budget; a stalled
// provider is cut at the budget; a retry-after beyond the budget ends the
// call at once with the rate-limit error.
func TestInvariant10_WholeCallBudgetEveryOperation(t *testing.T) {
	budget := 300 * time.Millisecond
	for _, oc := range opCases() {
		t.Run(oc.name+"/"+string(oc.f), func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			cfg := opFormat(srv, oc.f)

			// Endless 503s with backoff: the ladder stops inside the budget.
			c := newClient(t, cfg, WithTimeout(budget), WithModelCacheTTL(0),
				WithRetryPolicy(RetryPolicy{MaxAttempts: 100, BaseDelay: 40 * time.Millisecond, MaxDelay: 40 * time.Millisecond}))
			for i := 0; i < 60; i++ {
				srv.Push(llmtest.Status(503, 0))
			}
			start := time.Now()
			err := oc.call(ctxT(t), c)
			var api *llm.APIError
			if err == nil || (!errors.As(err, &api) && !errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("503s: %v", err)
			}
			if el := time.Since(start); el > budget+time.Second {
				t.Fatalf("503s took %v with a %v budget", el, budget)
			}

			// A stall is cut by the budget.
			srv2 := llmtest.NewServer()
			defer srv2.Close()
			cfg2 := opFormat(srv2, oc.f)
			c2 := newClient(t, cfg2, WithTimeout(budget), WithModelCacheTTL(0))
			srv2.Push(llmtest.Fail(llmtest.Fault{Kind: llmtest.FaultStall, Stall: 10 * time.Second}))
			start = time.Now()
			err = oc.call(ctxT(t), c2)
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > budget+time.Second {
				t.Fatalf("stall: %v after %v", err, time.Since(start))
			}

			// A retry-after beyond the budget ends the call at once.
			srv2.Push(llmtest.Status(429, 30*time.Second))
			start = time.Now()
			err = oc.call(ctxT(t), c2)
			var rl *llm.RateLimitError
			if !errors.As(err, &rl) || time.Since(start) > budget {
				t.Fatalf("retry-after 30s: %v after %v", err, time.Since(start))
			}
		})
	}
}

// TestInvariant02_KeysNeverInErrorsEveryOperation: a provider that echoes
// the key in its error body, on every non-chat entry point of every format,
// and the unsupported and config errors of the others; errors, attempt
// events and logs never show the key, and it travels only in the
// credential header.
func TestInvariant02_KeysNeverInErrorsEveryOperation(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	var logs bytes.Buffer
	var obs attempts
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for _, oc := range opCases() {
		c := newClient(t, opFormat(srv, oc.f), WithAttemptObserver(obs.observe), WithLogger(logger), WithModelCacheTTL(0))
		for _, f := range []llmtest.Fault{
			{Kind: llmtest.FaultStatus, Status: 401, Message: "Incorrect API key provided: " + testKey},
			{Kind: llmtest.FaultInStreamError, Status: 400, Message: "bad key " + testKey},
		} {
			srv.Push(llmtest.Step{Fault: &f})
			err := oc.call(ctxT(t), c)
			if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testKey) {
				t.Fatalf("%s/%s: error leaks the key or is nil: %v", oc.name, oc.f, err)
			}
		}
	}
	// Unsupported operations and bad requests name no key either.
	for _, cfg := range formats(srv) {
		c := newClient(t, cfg)
		for _, err := range []error{
			func() error { _, err := c.Transcribe(ctxT(t), &llm.TranscriptionRequest{Model: "m"}); return err }(),
			func() error {
				_, err := c.Embed(ctxT(t), &llm.EmbedRequest{Model: "m", Inputs: []string{testKey}, Headers: map[string]string{"X-Api-Key": testKey}})
				return err
			}(),
			func() error {
				_, err := c.Speak(ctxT(t), &llm.SpeechRequest{Model: "m", Input: "x", Headers: map[string]string{"Authorization": "Bearer " + testKey}})
				return err
			}(),
			func() error { _, err := c.CountTokens(ctxT(t), &llm.ChatRequest{Model: "m"}); return err }(),
		} {
			if err == nil || strings.Contains(err.Error(), testKey) {
				t.Fatalf("%s: %v", cfg.ID, err)
			}
		}
	}
	for _, ev := range obs.all() {
		if ev.Err != nil && strings.Contains(ev.Err.Error(), testKey) {
			t.Fatalf("attempt event leaks the key: %v", ev.Err)
		}
	}
	if strings.Contains(logs.String(), testKey) {
		t.Fatal("log leaks the key")
	}
	for _, r := range srv.Requests() {
		if bytes.Contains(r.Body, []byte(testKey)) || strings.Contains(r.Path+r.Query.Encode(), testKey) {
			t.Fatalf("key sent outside the credential header: %s %s", r.Path, r.Body)
		}
		if r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")+r.Header.Get("X-Goog-Api-Key") == "" {
			t.Fatalf("no credential header on %s", r.Path)
		}
	}
}

// embedTokens is llmtest's prompt-token count for an n-byte embedding input.
func embedTokens(n int) int { return n/4 + 1 }
