package llmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// BatchOutcome is what becomes of one request of a provider batch.
type BatchOutcome uint8

const (
	// BatchSucceeded: the request is answered (BatchResult.Reply).
	BatchSucceeded BatchOutcome = iota
	// BatchErrored: the request fails with BatchResult.Fault (default a
	// 400 invalid request).
	BatchErrored
	// BatchExpired: the batch's window ends before the request runs.
	BatchExpired
)

// BatchResult is the fate of one request of a batch, decided when the
// batch is created.
type BatchResult struct {
	Outcome BatchOutcome
	// Reply is a succeeded request's answer; zero: "batch reply to
	// <custom_id>" with usage 10 prompt / 5 completion tokens.
	Reply *Reply
	// Fault is an errored request's error (Status, Code, Type, Message).
	Fault *Fault
}

// BatchStage names a point in the batch APIs where BatchAPIOptions.Hook
// is called.
type BatchStage string

// The stages a Hook sees.
const (
	// StageUpload: an OpenAI file upload was read, before it is stored.
	StageUpload BatchStage = "upload"
	// StageCreated: a batch was created and stored, before the answer
	// that names its id is sent.
	StageCreated BatchStage = "created"
	// StagePoll: a batch is being read (GET), before the answer.
	StagePoll BatchStage = "poll"
	// StageResults: results are being downloaded (OpenAI file content,
	// Anthropic results), before the answer.
	StageResults BatchStage = "results"
)

// BatchAPIOptions configure the provider batch APIs a Server serves (see
// WithBatchAPI).
type BatchAPIOptions struct {
	// Validate, Run and Finalize are how long a batch stays in each phase,
	// on the server's clock (WithClock's, else the wall clock). During Run
	// the requests finish evenly, in input order. All zero: a batch is
	// done as soon as it is created.
	Validate, Run, Finalize time.Duration
	// Result decides each request's fate from its custom_id (Gemini: its
	// metadata key) and its request body; nil: every request succeeds.
	Result func(customID string, body []byte) BatchResult
	// Hook, when set, is called at each stage with the batch or file id;
	// a test may block in it (to kill a client mid-call).
	Hook func(stage BatchStage, id string)
}

// WithBatchAPI makes the Server serve the three providers' batch APIs:
// OpenAI files and batches (/v1/files, /v1/batches), Anthropic Message
// Batches (/v1/messages/batches) and Gemini Batch Mode
// (models/{model}:batchGenerateContent, /v1beta/batches). Batches move
// through their states on the server's clock; Server.Batches lists them.
func WithBatchAPI(o BatchAPIOptions) Option {
	return func(c *config) {
		c.batch = &batchAPI{opts: o, files: map[string]*batchFile{}, batches: map[string]*fakeBatch{}}
	}
}

// BatchInfo describes one batch the Server holds.
type BatchInfo struct {
	Format Format
	ID     string
	// CustomIDs are the batch's requests, in input order.
	CustomIDs []string
	// Name is the OpenAI metadata, Gemini displayName or "" (Anthropic).
	Name      string
	Cancelled bool
}

// Batches lists the batches created so far, oldest first (nil without
// WithBatchAPI).
func (s *Server) Batches() []BatchInfo {
	b := s.cfg.batch
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BatchInfo, 0, len(b.order))
	for _, id := range b.order {
		fb := b.batches[id]
		info := BatchInfo{Format: fb.format, ID: id, Name: fb.name, Cancelled: !fb.cancelAt.IsZero()}
		for _, r := range fb.reqs {
			info.CustomIDs = append(info.CustomIDs, r.customID)
		}
		out = append(out, info)
	}
	return out
}

// batchAPI is the state of the batch APIs.
type batchAPI struct {
	opts    BatchAPIOptions
	mu      sync.Mutex
	seq     int
	files   map[string]*batchFile
	batches map[string]*fakeBatch
	order   []string
}

type batchFile struct {
	id, name string
	data     []byte
	created  time.Time
}

type batchReq struct {
	customID string
	body     []byte
	model    string
	result   BatchResult
}

type fakeBatch struct {
	format   Format
	id       string
	name     string // OpenAI metadata (as JSON), Gemini displayName
	metadata map[string]string
	endpoint string
	inputID  string
	model    string
	reqs     []batchReq
	created  time.Time
	cancelAt time.Time
	outID    string
	errID    string
}

// batch phases.
type phase uint8

const (
	phValidating phase = iota
	phRunning
	phFinalizing
	phEnded
)

// state is the batch's phase at now, how many requests have finished, and
// whether it ended by cancellation.
func (b *batchAPI) state(fb *fakeBatch, now time.Time) (ph phase, done int, cancelled bool) {
	o := b.opts
	at := func(t time.Time) (phase, int) {
		el := t.Sub(fb.created)
		switch {
		case el < o.Validate:
			return phValidating, 0
		case el < o.Validate+o.Run:
			return phRunning, int(int64(len(fb.reqs)) * int64(el-o.Validate) / int64(o.Run))
		case el < o.Validate+o.Run+o.Finalize:
			return phFinalizing, len(fb.reqs)
		}
		return phEnded, len(fb.reqs)
	}
	if fb.cancelAt.IsZero() || !now.After(fb.cancelAt) && !now.Equal(fb.cancelAt) {
		ph, done = at(now)
		return ph, done, false
	}
	cph, cdone := at(fb.cancelAt)
	if cph == phEnded {
		return phEnded, cdone, false
	}
	if now.Sub(fb.cancelAt) < o.Finalize {
		return phFinalizing, cdone, true // cancelling
	}
	return phEnded, cdone, true
}

// counts of a batch's requests at now.
type batchCounts struct {
	total, processing, succeeded, errored, expired, canceled int
}

func (b *batchAPI) counts(fb *fakeBatch, now time.Time) (phase, bool, batchCounts) {
	ph, done, cancelled := b.state(fb, now)
	c := batchCounts{total: len(fb.reqs)}
	for i, r := range fb.reqs {
		switch {
		case i >= done && cancelled && ph == phEnded:
			c.canceled++
		case i >= done:
			c.processing++
		case r.result.Outcome == BatchErrored:
			c.errored++
		case r.result.Outcome == BatchExpired:
			if ph == phEnded {
				c.expired++
			} else {
				c.processing++
			}
		default:
			c.succeeded++
		}
	}
	return ph, cancelled, c
}

// itemStatus is one request's final state in an ended batch.
func itemStatus(fb *fakeBatch, i, done int, cancelled bool) BatchOutcome {
	if i >= done && cancelled {
		return batchCanceled
	}
	return fb.reqs[i].result.Outcome
}

// batchCanceled is internal: a request a cancel stopped.
const batchCanceled BatchOutcome = 255

func (b *batchAPI) hook(stage BatchStage, id string) {
	if b.opts.Hook != nil {
		b.opts.Hook(stage, id)
	}
}

func (b *batchAPI) newID(prefix string) string {
	b.seq++
	return fmt.Sprintf("%s%06d", prefix, b.seq)
}

func (b *batchAPI) resultOf(customID string, body []byte) BatchResult {
	if b.opts.Result == nil {
		return BatchResult{}
	}
	return b.opts.Result(customID, body)
}

// answer renders a succeeded request's body in format f (an OpenAI
// embeddings list for an /v1/embeddings batch).
func answer(f Format, r batchReq, seq int, endpoint string) []byte {
	reply := Reply{Text: "batch reply to " + r.customID, Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 5}}
	if r.result.Reply != nil {
		reply = *r.result.Reply
	}
	p := newPlan(&reply, len(r.body), r.model, seq)
	if endpoint == "/v1/embeddings" {
		a, err := openAIEmbed(&opRequest{body: r.body, usage: reply.Usage}, p)
		if err != nil {
			return marshal(map[string]any{"error": oaErrorFields(http.StatusBadRequest, &Fault{Message: err.Error()})})
		}
		return a.body
	}
	switch f {
	case FormatAnthropic:
		return anthropic{}.buffered(p)
	case FormatGemini:
		return gemini{}.buffered(p)
	}
	return openAI{}.buffered(p)
}

func faultOf(r batchReq) (int, *Fault) {
	f := r.result.Fault
	if f == nil {
		f = &Fault{Status: http.StatusBadRequest, Message: "llmtest: this request is refused"}
	}
	status := f.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	return status, f
}

// batchRoute returns the handler of a batch API path, or nil.
func (s *Server) batchRoute(r *http.Request) func(w http.ResponseWriter, r *http.Request, body []byte) {
	b := s.cfg.batch
	if b == nil {
		return nil
	}
	p := r.URL.Path
	switch {
	case p == "/v1/files" || strings.HasPrefix(p, "/v1/files/") || p == "/v1/batches" || strings.HasPrefix(p, "/v1/batches/"):
		return func(w http.ResponseWriter, r *http.Request, body []byte) { s.serveOpenAIBatch(b, w, r, body) }
	case p == "/v1/messages/batches" || strings.HasPrefix(p, "/v1/messages/batches/"):
		return func(w http.ResponseWriter, r *http.Request, body []byte) { s.serveAnthropicBatch(b, w, r, body) }
	case strings.HasSuffix(p, ":batchGenerateContent") && strings.HasPrefix(p, "/v1beta/models/"),
		p == "/v1beta/batches" || strings.HasPrefix(p, "/v1beta/batches/"):
		return func(w http.ResponseWriter, r *http.Request, body []byte) { s.serveGeminiBatch(b, w, r, body) }
	}
	return nil
}

func (s *Server) recordBatch(f Format, r *http.Request, body []byte) {
	s.mu.Lock()
	s.reqs = append(s.reqs, Recorded{Format: f, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body, At: s.now()})
	s.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(v))
}

// ---- OpenAI: files and batches ----

func oaFail(w http.ResponseWriter, status int, msg, param string) {
	e := oaErrorFields(status, &Fault{Message: msg})
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, struct {
		Error oaError `json:"error"`
	}{e})
}

type oaFileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
}

type oaBatchObject struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           any               `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        int64             `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    map[string]int    `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

func (s *Server) serveOpenAIBatch(b *batchAPI, w http.ResponseWriter, r *http.Request, body []byte) {
	s.recordBatch(FormatOpenAI, r, body)
	p := r.URL.Path
	switch {
	case p == "/v1/files" && r.Method == http.MethodPost:
		s.oaUpload(b, w, r, body)
	case strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content") && r.Method == http.MethodGet:
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")
		b.hook(StageResults, id)
		b.mu.Lock()
		f := b.files[id]
		if f != nil && f.data == nil { // an output file: rendered on demand
			f = s.oaRender(b, id)
		}
		b.mu.Unlock()
		if f == nil {
			oaFail(w, http.StatusNotFound, "No such File object: "+id, "id")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(f.data)
	case p == "/v1/batches" && r.Method == http.MethodPost:
		s.oaCreate(b, w, body)
	case p == "/v1/batches" && r.Method == http.MethodGet:
		b.mu.Lock()
		var data []oaBatchObject
		for i := len(b.order) - 1; i >= 0; i-- {
			if fb := b.batches[b.order[i]]; fb.format == FormatOpenAI {
				data = append(data, s.oaObject(b, fb))
			}
		}
		b.mu.Unlock()
		out := map[string]any{"object": "list", "data": data, "has_more": false}
		if len(data) > 0 {
			out["first_id"], out["last_id"] = data[0].ID, data[len(data)-1].ID
		}
		writeJSON(w, http.StatusOK, out)
	case strings.HasPrefix(p, "/v1/batches/"):
		id, action, _ := strings.Cut(strings.TrimPrefix(p, "/v1/batches/"), "/")
		if action == "" && r.Method == http.MethodGet {
			b.hook(StagePoll, id)
		}
		b.mu.Lock()
		fb := b.batches[id]
		if fb == nil || fb.format != FormatOpenAI {
			b.mu.Unlock()
			oaFail(w, http.StatusNotFound, "No batch found with id '"+id+"'.", "")
			return
		}
		switch {
		case action == "cancel" && r.Method == http.MethodPost:
			if ph, _, _ := b.state(fb, s.now()); ph != phEnded && fb.cancelAt.IsZero() {
				fb.cancelAt = s.now()
			}
		case action != "" || r.Method != http.MethodGet:
			b.mu.Unlock()
			oaFail(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+p+")", "")
			return
		}
		obj := s.oaObject(b, fb)
		b.mu.Unlock()
		writeJSON(w, http.StatusOK, obj)
	default:
		oaFail(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+p+")", "")
	}
}

func (s *Server) oaUpload(b *batchAPI, w http.ResponseWriter, r *http.Request, body []byte) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		oaFail(w, http.StatusBadRequest, "Expected a multipart/form-data body", "")
		return
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var purpose, name string
	var data []byte
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			oaFail(w, http.StatusBadRequest, "Malformed multipart body", "")
			return
		}
		v, _ := io.ReadAll(part)
		switch part.FormName() {
		case "purpose":
			purpose = string(v)
		case "file":
			name, data = part.FileName(), v
		}
	}
	switch {
	case purpose != "batch":
		oaFail(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not one of ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] - 'purpose'", purpose), "purpose")
		return
	case data == nil:
		oaFail(w, http.StatusBadRequest, "Missing file", "file")
		return
	}
	b.hook(StageUpload, name)
	b.mu.Lock()
	f := &batchFile{id: b.newID("file-llmtest"), name: name, data: data, created: s.now()}
	b.files[f.id] = f
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, oaFileObject{ID: f.id, Object: "file", Bytes: len(data), CreatedAt: f.created.Unix(), Filename: name, Purpose: "batch", Status: "processed"})
}

func (s *Server) oaCreate(b *batchAPI, w http.ResponseWriter, body []byte) {
	var req struct {
		InputFileID      string            `json:"input_file_id"`
		Endpoint         string            `json:"endpoint"`
		CompletionWindow string            `json:"completion_window"`
		Metadata         map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		oaFail(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "")
		return
	}
	switch {
	case req.CompletionWindow != "24h":
		oaFail(w, http.StatusBadRequest, fmt.Sprintf("Invalid value: '%s'. Supported values are: '24h'.", req.CompletionWindow), "completion_window")
		return
	case !slices.Contains([]string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/completions"}, req.Endpoint):
		oaFail(w, http.StatusBadRequest, fmt.Sprintf("Invalid value: '%s'.", req.Endpoint), "endpoint")
		return
	}
	b.mu.Lock()
	f := b.files[req.InputFileID]
	b.mu.Unlock()
	if f == nil {
		oaFail(w, http.StatusNotFound, "No such File object: "+req.InputFileID, "input_file_id")
		return
	}
	fb := &fakeBatch{format: FormatOpenAI, endpoint: req.Endpoint, inputID: f.id, metadata: req.Metadata, created: s.now()}
	if len(req.Metadata) > 0 {
		fb.name = string(marshal(req.Metadata))
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(f.data))
	sc.Buffer(nil, maxBody)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l struct {
			CustomID string          `json:"custom_id"`
			Method   string          `json:"method"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		var m struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.CustomID == "" || l.Method != "POST" || json.Unmarshal(l.Body, &m) != nil {
			oaFail(w, http.StatusBadRequest, fmt.Sprintf("The input file line %d is not a valid batch request.", n), "input_file_id")
			return
		}
		if l.URL != req.Endpoint {
			oaFail(w, http.StatusBadRequest, fmt.Sprintf("The url of line %d (%s) does not match the batch endpoint %s.", n, l.URL, req.Endpoint), "input_file_id")
			return
		}
		if seen[l.CustomID] {
			oaFail(w, http.StatusBadRequest, fmt.Sprintf("The custom_id %q of line %d is a duplicate.", l.CustomID, n), "input_file_id")
			return
		}
		seen[l.CustomID] = true
		fb.reqs = append(fb.reqs, batchReq{customID: l.CustomID, body: l.Body, model: m.Model, result: b.resultOf(l.CustomID, l.Body)})
	}
	if len(fb.reqs) == 0 {
		oaFail(w, http.StatusBadRequest, "The input file is empty.", "input_file_id")
		return
	}
	b.mu.Lock()
	fb.id = b.newID("batch_llmtest")
	b.batches[fb.id] = fb
	b.order = append(b.order, fb.id)
	b.mu.Unlock()
	b.hook(StageCreated, fb.id)
	b.mu.Lock()
	obj := s.oaObject(b, fb)
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, obj)
}

// oaObject renders a batch at the server's now; it names (and registers)
// the output and error files once the batch has ended. b.mu is held.
func (s *Server) oaObject(b *batchAPI, fb *fakeBatch) oaBatchObject {
	now := s.now()
	ph, cancelled, c := b.counts(fb, now)
	unix := func(t time.Time) *int64 { u := t.Unix(); return &u }
	o := b.opts
	obj := oaBatchObject{ID: fb.id, Object: "batch", Endpoint: fb.endpoint, InputFileID: fb.inputID, CompletionWindow: "24h",
		CreatedAt: fb.created.Unix(), ExpiresAt: fb.created.Add(24 * time.Hour).Unix(), Metadata: fb.metadata,
		RequestCounts: map[string]int{"total": c.total, "completed": c.succeeded, "failed": c.errored}}
	if ph >= phRunning {
		obj.InProgressAt = unix(fb.created.Add(o.Validate))
	}
	switch {
	case ph == phValidating:
		obj.Status = "validating"
	case ph == phRunning:
		obj.Status = "in_progress"
	case ph == phFinalizing && cancelled:
		obj.Status, obj.CancellingAt = "cancelling", unix(fb.cancelAt)
	case ph == phFinalizing:
		obj.Status, obj.FinalizingAt = "finalizing", unix(fb.created.Add(o.Validate+o.Run))
	case cancelled:
		obj.Status, obj.CancellingAt, obj.CancelledAt = "cancelled", unix(fb.cancelAt), unix(fb.cancelAt.Add(o.Finalize))
	case c.expired > 0:
		obj.Status, obj.ExpiredAt = "expired", unix(fb.created.Add(o.Validate+o.Run+o.Finalize))
	default:
		obj.Status, obj.CompletedAt = "completed", unix(fb.created.Add(o.Validate+o.Run+o.Finalize))
	}
	if ph == phEnded {
		if fb.outID == "" {
			fb.outID, fb.errID = b.newID("file-llmtest-out"), b.newID("file-llmtest-err")
			b.files[fb.outID] = &batchFile{id: fb.outID, name: fb.id + "_output.jsonl", created: now}
			b.files[fb.errID] = &batchFile{id: fb.errID, name: fb.id + "_error.jsonl", created: now}
			b.files[fb.outID+"#batch"] = &batchFile{id: fb.id}
			b.files[fb.errID+"#batch"] = &batchFile{id: fb.id}
		}
		obj.OutputFileID, obj.ErrorFileID = &fb.outID, &fb.errID
		if c.succeeded == 0 {
			obj.OutputFileID = nil
		}
		if c.errored+c.expired+c.canceled == 0 {
			obj.ErrorFileID = nil
		}
	}
	return obj
}

// oaRender renders an output or error file of an ended batch. b.mu is held.
func (s *Server) oaRender(b *batchAPI, id string) *batchFile {
	ref := b.files[id+"#batch"]
	if ref == nil {
		return nil
	}
	fb := b.batches[ref.id]
	ph, done, cancelled := b.state(fb, s.now())
	if ph != phEnded {
		return nil
	}
	wantErr := id == fb.errID
	var buf bytes.Buffer
	for i, r := range fb.reqs {
		line := map[string]any{"id": fmt.Sprintf("batch_req_llmtest_%s_%d", fb.id, i), "custom_id": r.customID, "response": nil, "error": nil}
		isErr := true
		switch itemStatus(fb, i, done, cancelled) {
		case BatchSucceeded:
			isErr = false
			line["response"] = map[string]any{"status_code": 200, "request_id": fmt.Sprintf("req_llmtest_%d", i), "body": json.RawMessage(answer(FormatOpenAI, r, i+1, fb.endpoint))}
		case BatchErrored:
			status, f := faultOf(r)
			line["response"] = map[string]any{"status_code": status, "request_id": fmt.Sprintf("req_llmtest_%d", i),
				"body": map[string]any{"error": oaErrorFields(status, f)}}
		case BatchExpired:
			line["error"] = map[string]string{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
		case batchCanceled:
			line["error"] = map[string]string{"code": "batch_cancelled", "message": "This request was cancelled."}
		}
		if isErr == wantErr {
			buf.Write(marshal(line))
			buf.WriteByte('\n')
		}
	}
	return &batchFile{id: id, data: buf.Bytes()}
}

// ---- Anthropic Message Batches ----

func anFail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Type  string  `json:"type"`
		Error anError `json:"error"`
	}{"error", anErrorFields(status, &Fault{Message: msg})})
}

var anCustomID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (s *Server) serveAnthropicBatch(b *batchAPI, w http.ResponseWriter, r *http.Request, body []byte) {
	s.recordBatch(FormatAnthropic, r, body)
	p := strings.TrimPrefix(r.URL.Path, "/v1/messages/batches")
	p = strings.TrimPrefix(p, "/")
	id, action, _ := strings.Cut(p, "/")
	switch {
	case id == "" && r.Method == http.MethodPost:
		s.anCreate(b, w, body)
	case id == "" && r.Method == http.MethodGet:
		b.mu.Lock()
		var data []any
		for i := len(b.order) - 1; i >= 0; i-- {
			if fb := b.batches[b.order[i]]; fb.format == FormatAnthropic {
				data = append(data, s.anObject(b, fb))
			}
		}
		b.mu.Unlock()
		out := map[string]any{"data": data, "has_more": false, "first_id": nil, "last_id": nil}
		writeJSON(w, http.StatusOK, out)
	default:
		switch {
		case action == "" && r.Method == http.MethodGet:
			b.hook(StagePoll, id)
		case action == "results":
			b.hook(StageResults, id)
		}
		b.mu.Lock()
		fb := b.batches[id]
		if fb == nil || fb.format != FormatAnthropic {
			b.mu.Unlock()
			anFail(w, http.StatusNotFound, "Message batch "+id+" not found")
			return
		}
		switch {
		case action == "" && r.Method == http.MethodGet:
		case action == "cancel" && r.Method == http.MethodPost:
			if ph, _, _ := b.state(fb, s.now()); ph != phEnded && fb.cancelAt.IsZero() {
				fb.cancelAt = s.now()
			}
		case action == "results" && r.Method == http.MethodGet:
			data, ok := s.anResults(b, fb)
			b.mu.Unlock()
			if !ok {
				anFail(w, http.StatusBadRequest, "Message batch "+id+" has not ended; results are not available yet")
				return
			}
			w.Header().Set("Content-Type", "application/binary")
			_, _ = w.Write(data)
			return
		default:
			b.mu.Unlock()
			anFail(w, http.StatusNotFound, "Not found")
			return
		}
		obj := s.anObject(b, fb)
		b.mu.Unlock()
		writeJSON(w, http.StatusOK, obj)
	}
}

func (s *Server) anCreate(b *batchAPI, w http.ResponseWriter, body []byte) {
	var req struct {
		Requests []struct {
			CustomID string          `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		anFail(w, http.StatusBadRequest, "requests: Input should be a valid list")
		return
	}
	if len(req.Requests) == 0 {
		anFail(w, http.StatusBadRequest, "requests: List should have at least 1 item after validation, not 0")
		return
	}
	fb := &fakeBatch{format: FormatAnthropic, created: s.now()}
	seen := map[string]bool{}
	for i, rq := range req.Requests {
		var params struct {
			Model     string          `json:"model"`
			MaxTokens int             `json:"max_tokens"`
			Messages  json.RawMessage `json:"messages"`
			Stream    bool            `json:"stream"`
		}
		switch {
		case !anCustomID.MatchString(rq.CustomID):
			anFail(w, http.StatusBadRequest, fmt.Sprintf("requests.%d.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i))
			return
		case seen[rq.CustomID]:
			anFail(w, http.StatusBadRequest, fmt.Sprintf("requests.%d.custom_id: Duplicate custom_id %q", i, rq.CustomID))
			return
		case json.Unmarshal(rq.Params, &params) != nil || params.Model == "" || params.MaxTokens <= 0 || len(params.Messages) == 0:
			anFail(w, http.StatusBadRequest, fmt.Sprintf("requests.%d.params: model, max_tokens and messages are required", i))
			return
		case params.Stream:
			anFail(w, http.StatusBadRequest, fmt.Sprintf("requests.%d.params.stream: streaming is not supported in batches", i))
			return
		}
		seen[rq.CustomID] = true
		fb.reqs = append(fb.reqs, batchReq{customID: rq.CustomID, body: rq.Params, model: params.Model, result: b.resultOf(rq.CustomID, rq.Params)})
	}
	b.mu.Lock()
	fb.id = b.newID("msgbatch_llmtest")
	b.batches[fb.id] = fb
	b.order = append(b.order, fb.id)
	b.mu.Unlock()
	b.hook(StageCreated, fb.id)
	b.mu.Lock()
	obj := s.anObject(b, fb)
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, obj)
}

// anObject renders a message_batch at now. b.mu is held.
func (s *Server) anObject(b *batchAPI, fb *fakeBatch) map[string]any {
	ph, _, c := b.counts(fb, s.now())
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	obj := map[string]any{"id": fb.id, "type": "message_batch", "processing_status": "in_progress",
		"request_counts": map[string]int{"processing": c.processing, "succeeded": c.succeeded, "errored": c.errored, "canceled": c.canceled, "expired": c.expired},
		"created_at":     ts(fb.created), "expires_at": ts(fb.created.Add(24 * time.Hour)),
		"ended_at": nil, "cancel_initiated_at": nil, "archived_at": nil, "results_url": nil}
	if !fb.cancelAt.IsZero() {
		obj["cancel_initiated_at"] = ts(fb.cancelAt)
		if ph != phEnded {
			obj["processing_status"] = "canceling"
		}
	}
	if ph == phEnded {
		obj["processing_status"] = "ended"
		obj["ended_at"] = ts(s.now())
		obj["results_url"] = s.URL + "/v1/messages/batches/" + fb.id + "/results"
	}
	return obj
}

// anResults renders the results JSONL of an ended batch, last request
// first (the API promises no order). b.mu is held.
func (s *Server) anResults(b *batchAPI, fb *fakeBatch) ([]byte, bool) {
	ph, done, cancelled := b.state(fb, s.now())
	if ph != phEnded {
		return nil, false
	}
	var buf bytes.Buffer
	for i := len(fb.reqs) - 1; i >= 0; i-- {
		r := fb.reqs[i]
		var res any
		switch itemStatus(fb, i, done, cancelled) {
		case BatchSucceeded:
			res = map[string]any{"type": "succeeded", "message": json.RawMessage(answer(FormatAnthropic, r, i+1, ""))}
		case BatchErrored:
			status, f := faultOf(r)
			res = map[string]any{"type": "errored", "error": map[string]any{"type": "error", "error": anErrorFields(status, f)}}
		case BatchExpired:
			res = map[string]string{"type": "expired"}
		case batchCanceled:
			res = map[string]string{"type": "canceled"}
		}
		buf.Write(marshal(map[string]any{"custom_id": r.customID, "result": res}))
		buf.WriteByte('\n')
	}
	return buf.Bytes(), true
}

// ---- Gemini Batch Mode ----

func gmFail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": gmError{Code: status, Message: msg, Status: gmStatus(status)}})
}

func (s *Server) serveGeminiBatch(b *batchAPI, w http.ResponseWriter, r *http.Request, body []byte) {
	s.recordBatch(FormatGemini, r, body)
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, ":batchGenerateContent") && r.Method == http.MethodPost:
		model := strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/models/"), ":batchGenerateContent")
		s.gmCreate(b, w, model, body)
	case p == "/v1beta/batches" && r.Method == http.MethodGet:
		b.mu.Lock()
		var ops []any
		for i := len(b.order) - 1; i >= 0; i-- {
			if fb := b.batches[b.order[i]]; fb.format == FormatGemini {
				ops = append(ops, s.gmOperation(b, fb, false))
			}
		}
		b.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"operations": ops})
	default:
		rest := strings.TrimPrefix(p, "/v1beta/batches/")
		id, action, _ := strings.Cut(rest, ":")
		id = "batches/" + id
		if action == "" && r.Method == http.MethodGet {
			b.hook(StagePoll, id)
		}
		b.mu.Lock()
		fb := b.batches[id]
		if fb == nil || fb.format != FormatGemini {
			b.mu.Unlock()
			gmFail(w, http.StatusNotFound, "Requested entity was not found.")
			return
		}
		switch {
		case action == "" && r.Method == http.MethodGet:
			op := s.gmOperation(b, fb, true)
			b.mu.Unlock()
			writeJSON(w, http.StatusOK, op)
		case action == "cancel" && r.Method == http.MethodPost:
			if ph, _, _ := b.state(fb, s.now()); ph != phEnded && fb.cancelAt.IsZero() {
				fb.cancelAt = s.now()
			}
			b.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{})
		default:
			b.mu.Unlock()
			gmFail(w, http.StatusNotFound, "Requested entity was not found.")
		}
	}
}

func (s *Server) gmCreate(b *batchAPI, w http.ResponseWriter, model string, body []byte) {
	type inlined struct {
		Request  json.RawMessage   `json:"request"`
		Metadata map[string]string `json:"metadata"`
	}
	type requests struct {
		Requests []inlined `json:"requests"`
	}
	type input struct {
		Requests *requests `json:"requests"`
		FileName string    `json:"fileName"`
		FileSnak string    `json:"file_name"`
	}
	var req struct {
		Batch struct {
			DisplayName     string `json:"displayName"`
			DisplayNameSnak string `json:"display_name"`
			InputConfig     *input `json:"inputConfig"`
			InputConfigSnak *input `json:"input_config"`
		} `json:"batch"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		gmFail(w, http.StatusBadRequest, "Invalid JSON payload received.")
		return
	}
	name, in := req.Batch.DisplayName, req.Batch.InputConfig
	if name == "" {
		name = req.Batch.DisplayNameSnak
	}
	if in == nil {
		in = req.Batch.InputConfigSnak
	}
	switch {
	case name == "":
		gmFail(w, http.StatusBadRequest, "* BatchGenerateContentRequest.batch.display_name: display_name is required.")
		return
	case in == nil || in.Requests == nil || len(in.Requests.Requests) == 0:
		gmFail(w, http.StatusBadRequest, "* BatchGenerateContentRequest.batch.input_config: inlined requests are required (this fake serves no File API).")
		return
	}
	fb := &fakeBatch{format: FormatGemini, name: name, model: model, created: s.now()}
	for i, rq := range in.Requests.Requests {
		var gr struct {
			Contents []json.RawMessage `json:"contents"`
		}
		if json.Unmarshal(rq.Request, &gr) != nil || len(gr.Contents) == 0 {
			gmFail(w, http.StatusBadRequest, fmt.Sprintf("* BatchGenerateContentRequest.batch.input_config.requests.requests[%d].request.contents: contents is not specified", i))
			return
		}
		key := rq.Metadata["key"]
		fb.reqs = append(fb.reqs, batchReq{customID: key, body: rq.Request, model: model, result: b.resultOf(key, rq.Request)})
	}
	b.mu.Lock()
	fb.id = b.newID("batches/llmtest")
	b.batches[fb.id] = fb
	b.order = append(b.order, fb.id)
	b.mu.Unlock()
	b.hook(StageCreated, fb.id)
	b.mu.Lock()
	op := s.gmOperation(b, fb, false)
	b.mu.Unlock()
	writeJSON(w, http.StatusOK, op)
}

// gmOperation renders a batch as the long-running Operation the REST API
// returns; withOutput adds the inlined responses of an ended batch. b.mu
// is held.
func (s *Server) gmOperation(b *batchAPI, fb *fakeBatch, withOutput bool) map[string]any {
	now := s.now()
	ph, cancelled, c := b.counts(fb, now)
	state := "BATCH_STATE_PENDING"
	switch {
	case ph == phRunning || ph == phFinalizing:
		state = "BATCH_STATE_RUNNING"
	case ph == phEnded && cancelled:
		state = "BATCH_STATE_CANCELLED"
	case ph == phEnded && c.expired > 0:
		state = "BATCH_STATE_EXPIRED"
	case ph == phEnded:
		state = "BATCH_STATE_SUCCEEDED"
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	meta := map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
		"model": "models/" + fb.model, "name": fb.id, "displayName": fb.name, "state": state,
		"createTime": ts(fb.created), "updateTime": ts(now),
		"batchStats": map[string]string{"requestCount": strconv.Itoa(c.total), "successfulRequestCount": strconv.Itoa(c.succeeded),
			"failedRequestCount": strconv.Itoa(c.errored), "pendingRequestCount": strconv.Itoa(c.processing)}}
	op := map[string]any{"name": fb.id, "metadata": meta}
	if ph != phEnded {
		return op
	}
	op["done"] = true
	meta["endTime"] = ts(now)
	if !withOutput || state != "BATCH_STATE_SUCCEEDED" && state != "BATCH_STATE_EXPIRED" {
		return op
	}
	_, done, _ := b.state(fb, now)
	var items []any
	for i, r := range fb.reqs {
		md := map[string]string{"key": r.customID}
		switch itemStatus(fb, i, done, false) {
		case BatchSucceeded:
			items = append(items, map[string]any{"response": json.RawMessage(answer(FormatGemini, r, i+1, "")), "metadata": md})
		case BatchErrored:
			status, f := faultOf(r)
			items = append(items, map[string]any{"error": map[string]any{"code": grpcCode(status), "message": f.Message}, "metadata": md})
		}
	}
	op["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
		"inlinedResponses": map[string]any{"inlinedResponses": items}}
	return op
}

// grpcCode is the google.rpc.Code of an HTTP status (a per-request error
// in a batch output is a google.rpc.Status).
func grpcCode(status int) int {
	switch status {
	case http.StatusBadRequest:
		return 3 // INVALID_ARGUMENT
	case http.StatusNotFound:
		return 5
	case http.StatusForbidden:
		return 7
	case http.StatusTooManyRequests:
		return 8
	case http.StatusUnauthorized:
		return 16
	case http.StatusServiceUnavailable:
		return 14
	}
	return 13 // INTERNAL
}
