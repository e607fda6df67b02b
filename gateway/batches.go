package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// DefaultMaxBatchLines caps a batch's requests when Options.MaxBatchLines
// is zero (OpenAI's own limit).
const DefaultMaxBatchLines = 50_000

// storedBatch is a batch's object, its owner and how it runs, kept as
// <id>.json in the files directory so that a restarted gateway lists it
// and resumes it.
type storedBatch struct {
	Batch openai.ServerBatch `json:"batch"`
	Owner string             `json:"owner"`
	// Cancel records a client's cancel: a resumed job finishes cancelling.
	Cancel bool `json:"cancel,omitempty"`
}

// batchJob is one batch: its state, and the job that runs it.
type batchJob struct {
	mu     sync.Mutex
	sb     storedBatch
	cancel context.CancelFunc // ends the running job; nil once it ended
	// lost: on the fleet, another replica holds the batch's lease now
	// (fleetfiles.go); the job stops here without finishing it.
	lost atomic.Bool
}

func (b *batchJob) snapshot() openai.ServerBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.sb.Batch
	out.Metadata = cloneMap(b.sb.Batch.Metadata)
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// batches runs the OpenAI batch jobs of a Handler.
type batches struct {
	mu   sync.Mutex
	jobs map[string]*batchJob
	wg   sync.WaitGroup
	base context.Context
	stop context.CancelFunc
	// killed: a test's kill of the Handler (fleetfiles.go): nothing more
	// reaches the store.
	killed atomic.Bool
}

func (h *Handler) batchPath(id string) string { return filepath.Join(h.files.dir, id+".json") }
func (h *Handler) outputPath(id string) string {
	return filepath.Join(h.files.dir, id+".output.jsonl")
}

// save writes a batch's state; a failure is logged (the job goes on, and
// its output is safe in its own file).
func (h *Handler) save(b *batchJob) {
	if h.fleet != nil {
		h.fleetSave(b) // fleetfiles.go
		return
	}
	b.mu.Lock()
	data, err := json.Marshal(&b.sb)
	id := b.sb.Batch.ID
	b.mu.Unlock()
	if err == nil {
		err = writeFileSync(h.batchPath(id), data)
	}
	if err != nil {
		h.log.Warn("gateway: saving a batch failed", "batch", id, "error", err.Error())
	}
}

// loadBatches reads the batches of the files directory and resumes those
// a previous gateway left running.
func (h *Handler) loadBatches() error {
	paths, err := filepath.Glob(filepath.Join(h.files.dir, "batch_*.json"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("gateway: files directory: %w", err)
		}
		var sb storedBatch
		if err := json.Unmarshal(data, &sb); err != nil || !validID(sb.Batch.ID, "batch_") {
			continue
		}
		b := &batchJob{sb: sb}
		h.batches.jobs[sb.Batch.ID] = b
		if !sb.Batch.Terminal() {
			h.startBatch(b, true)
		}
	}
	return nil
}

func unix(t time.Time) *int64 {
	v := t.Unix()
	return &v
}

// createBatch serves POST /v1/batches.
func (h *Handler) createBatch(w http.ResponseWriter, r *http.Request) {
	const f = formatOpenAI
	ks, body, ok := h.begin(w, r, f)
	if !ok {
		return
	}
	req, err := openai.DecodeServerBatchCreate(body, batch.URLChat, batch.URLEmbeddings)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	owner := ownerOf(ks)
	in, ok := h.files.get(req.InputFileID, owner)
	if !ok {
		h.fail(w, f, &Error{Status: http.StatusNotFound, Message: "no such file: " + clipID(req.InputFileID)})
		return
	}
	if in.File.Purpose != purposeBatch {
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "input_file_id: the file's purpose is " + strconv.Quote(in.File.Purpose) + ", not batch"})
		return
	}
	now := h.opts.Now()
	b := &batchJob{sb: storedBatch{Owner: owner, Batch: openai.ServerBatch{
		ID: newID("batch_"), Object: "batch", Endpoint: req.Endpoint, InputFileID: req.InputFileID,
		CompletionWindow: req.CompletionWindow, Status: "validating", CreatedAt: now.Unix(),
		ExpiresAt: unix(now.Add(h.batchWindow)), Metadata: req.Metadata,
	}}}
	if h.fleet != nil {
		if err := h.fleetCreate(b); err != nil { // fleetfiles.go
			h.log.Warn("gateway: key store: storing a batch failed", "error", err.Error())
			h.fail(w, f, &Error{Status: http.StatusServiceUnavailable, Message: "the store cannot be reached to keep the batch; retry shortly", RetryAfter: time.Second})
			return
		}
	} else {
		h.save(b)
	}
	h.batches.mu.Lock()
	h.batches.jobs[b.sb.Batch.ID] = b
	h.batches.mu.Unlock()
	snap := b.snapshot()
	h.startBatch(b, false)
	out, _ := json.Marshal(snap)
	h.writeJSON(w, out)
}

// batchOf authenticates a request about batch {id} and finds it.
func (h *Handler) batchOf(w http.ResponseWriter, r *http.Request) (*batchJob, bool) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, formatOpenAI, e)
		return nil, false
	}
	id := r.PathValue("id")
	h.batches.mu.Lock()
	b := h.batches.jobs[id]
	h.batches.mu.Unlock()
	if b == nil || b.sb.Owner != ownerOf(ks) {
		h.fail(w, formatOpenAI, &Error{Status: http.StatusNotFound, Message: "no such batch: " + clipID(id)})
		return nil, false
	}
	return b, true
}

// getBatch serves GET /v1/batches/{id}.
func (h *Handler) getBatch(w http.ResponseWriter, r *http.Request) {
	if h.fleet != nil {
		h.fleetBatch(w, r, false) // fleetfiles.go
		return
	}
	if b, ok := h.batchOf(w, r); ok {
		out, _ := json.Marshal(b.snapshot())
		h.writeJSON(w, out)
	}
}

// cancelBatch serves POST /v1/batches/{id}/cancel: the batch is
// cancelling until its job has stopped (native batches cancelled too) and
// its output and error files hold what finished; then it is cancelled.
func (h *Handler) cancelBatch(w http.ResponseWriter, r *http.Request) {
	if h.fleet != nil {
		h.fleetBatch(w, r, true) // fleetfiles.go
		return
	}
	b, ok := h.batchOf(w, r)
	if !ok {
		return
	}
	b.mu.Lock()
	terminal, already, status := b.sb.Batch.Terminal(), b.sb.Cancel, b.sb.Batch.Status
	if !terminal && !already {
		b.sb.Cancel = true
		b.sb.Batch.Status = "cancelling"
		b.sb.Batch.CancellingAt = unix(h.opts.Now())
	}
	cancel := b.cancel
	b.mu.Unlock()
	switch {
	case terminal:
		h.fail(w, formatOpenAI, &Error{Status: http.StatusConflict, Message: "batch " + b.sb.Batch.ID + " is " + status + ": it cannot be cancelled"})
		return
	case !already:
		h.save(b)
		if cancel != nil {
			cancel()
		}
	}
	out, _ := json.Marshal(b.snapshot())
	h.writeJSON(w, out)
}

// listBatches serves GET /v1/batches (?limit=, ?after=), newest first.
func (h *Handler) listBatches(w http.ResponseWriter, r *http.Request) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, formatOpenAI, e)
		return
	}
	owner := ownerOf(ks)
	var all []openai.ServerBatch
	if h.fleet != nil {
		all = h.storeBatches(owner) // fleetfiles.go
	} else {
		h.batches.mu.Lock()
		for _, b := range h.batches.jobs {
			if b.sb.Owner == owner {
				all = append(all, b.snapshot())
			}
		}
		h.batches.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b openai.ServerBatch) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return -compareStrings(a.ID, b.ID)
	})
	if after := r.URL.Query().Get("after"); after != "" {
		for i, b := range all {
			if b.ID == after {
				all = all[i+1:]
				break
			}
		}
	}
	limit := 20
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 && v <= 100 {
		limit = v
	}
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	writeList(h, w, all, func(b *openai.ServerBatch) string { return b.ID }, more)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// startBatch runs a batch's job in the background until it ends or the
// Handler closes (then a restarted gateway resumes it).
func (h *Handler) startBatch(b *batchJob, resume bool) {
	h.batches.mu.Lock()
	defer h.batches.mu.Unlock()
	h.startBatchLocked(b, resume, 0)
}

// startBatchLocked is startBatch with h.batches.mu held (so that Close,
// which stops under it, never races a start). On the fleet, the batch's
// mirror (fleetfiles.go) runs beside it: its output lines from offset on
// reach the store.
func (h *Handler) startBatchLocked(b *batchJob, resume bool, offset int64) {
	if h.batches.base.Err() != nil {
		return // closing: the batch resumes on the next start, or another replica
	}
	ctx, cancel := context.WithCancel(h.batches.base)
	b.mu.Lock()
	b.cancel = cancel
	b.mu.Unlock()
	var done chan struct{}
	if h.fleet != nil {
		done = make(chan struct{})
		h.batches.wg.Add(1)
		go func() {
			defer h.batches.wg.Done()
			h.mirror(b, offset, done)
		}()
	}
	h.batches.wg.Add(1)
	go func() {
		defer h.batches.wg.Done()
		defer cancel()
		h.runBatch(ctx, b, resume)
		b.mu.Lock()
		b.cancel = nil
		b.mu.Unlock()
		if done != nil {
			close(done)
		}
	}()
}

// set changes a batch's state under its lock, then saves it.
func (h *Handler) set(b *batchJob, f func(*openai.ServerBatch)) {
	b.mu.Lock()
	f(&b.sb.Batch)
	b.mu.Unlock()
	h.save(b)
}

// runBatch validates a batch's input, runs it through package batch (live
// on the runtime, paced; natively where Options.BatchNative allows) and
// splits its output into OpenAI's output and error files.
func (h *Handler) runBatch(ctx context.Context, b *batchJob, resume bool) {
	b.mu.Lock()
	id, owner, inID, endpoint := b.sb.Batch.ID, b.sb.Owner, b.sb.Batch.InputFileID, b.sb.Batch.Endpoint
	status, cancelled := b.sb.Batch.Status, b.sb.Cancel
	b.mu.Unlock()
	fail := func(errs ...openai.ServerBatchError) {
		h.set(b, func(sb *openai.ServerBatch) {
			sb.Status, sb.FailedAt = "failed", unix(h.opts.Now())
			sb.Errors = &openai.ServerBatchErrors{Object: "list", Data: errs}
		})
	}
	if _, ok := h.files.get(inID, owner); !ok {
		fail(openai.ServerBatchError{Code: "file_not_found", Message: "the input file " + inID + " is gone"})
		return
	}
	inPath, err := h.files.local(inID) // a copy from the store on the fleet
	if err != nil {
		if h.stopped(b) {
			return
		}
		h.log.Warn("gateway: fetching a batch's input failed", "batch", id, "error", err.Error())
		fail(openai.ServerBatchError{Code: "file_not_found", Message: "the input file " + inID + " cannot be read"})
		return
	}
	var ks *keyState
	if owner != "" {
		for _, e := range h.keyMap() {
			if e.ks.key.Name == owner && e.until.IsZero() {
				ks = e.ks
			}
		}
		if ks == nil {
			fail(openai.ServerBatchError{Code: "key_removed", Message: "the gateway key that created the batch is no longer configured"})
			return
		}
	}
	if status == "validating" {
		total, errs, err := h.validateBatch(inPath, endpoint, ks)
		switch {
		case err != nil:
			fail(openai.ServerBatchError{Code: "invalid_file", Message: err.Error()})
			return
		case len(errs) > 0:
			fail(errs...)
			return
		}
		b.mu.Lock()
		if !b.sb.Cancel { // a cancel during validation stays "cancelling"
			b.sb.Batch.Status = "in_progress"
		}
		b.sb.Batch.InProgressAt = unix(h.opts.Now())
		b.sb.Batch.RequestCounts.Total = total
		b.mu.Unlock()
		h.save(b)
	}
	expired := false
	if !cancelled {
		// The completion window: at expires_at the job stops (its calls
		// in flight are cancelled) and what it did not finish expires.
		jctx, stop := context.WithTimeoutCause(ctx, h.untilExpiry(b), errBatchExpired)
		ok := h.runJob(jctx, b, inPath, ks, resume || status != "validating")
		expired = errors.Is(context.Cause(jctx), errBatchExpired)
		stop()
		if !ok || b.lost.Load() {
			return // the Handler closed (a restarted gateway resumes the job), or another replica runs it now
		}
		b.mu.Lock()
		cancelled = b.sb.Cancel
		b.mu.Unlock()
		expired = expired && !cancelled
	}
	if (cancelled || expired) && h.opts.BatchNative != nil && h.batches.base.Err() == nil {
		// Remote batches of the job keep running unless cancelled too.
		h.cancelRemote(b, inPath)
	}
	if h.stopped(b) {
		return
	}
	if expired {
		n, err := h.expireRest(id, inPath)
		if err != nil {
			h.log.Warn("gateway: writing a batch's expired lines failed", "batch", id, "error", err.Error())
			fail(openai.ServerBatchError{Code: "output_failed", Message: "writing the output files failed"})
			return
		}
		expired = n > 0 // a job that ended with its last line as the window closed completed
	}
	h.set(b, func(sb *openai.ServerBatch) {
		if !cancelled && !expired {
			sb.Status = "finalizing"
		}
		sb.FinalizingAt = unix(h.opts.Now())
	})
	outID, errID, counts, err := h.splitOutput(id, owner)
	if err != nil {
		h.log.Warn("gateway: writing a batch's output files failed", "batch", id, "error", err.Error())
		fail(openai.ServerBatchError{Code: "output_failed", Message: "writing the output files failed"})
		return
	}
	h.set(b, func(sb *openai.ServerBatch) {
		sb.OutputFileID, sb.ErrorFileID = outID, errID
		sb.RequestCounts.Completed, sb.RequestCounts.Failed = counts.Completed, counts.Failed
		if counts.Total > sb.RequestCounts.Total {
			sb.RequestCounts.Total = counts.Total
		}
		now := unix(h.opts.Now())
		switch {
		case cancelled:
			sb.Status, sb.CancelledAt = "cancelled", now
		case expired:
			sb.Status, sb.ExpiredAt = "expired", now
		default:
			sb.Status, sb.CompletedAt = "completed", now
		}
	})
}

// stopped reports whether the batch's job must stop here unfinished: the
// Handler closed, or another replica of the fleet holds its lease now.
func (h *Handler) stopped(b *batchJob) bool { return h.batches.base.Err() != nil || b.lost.Load() }

// errBatchExpired is the cause of a batch job's context ended by its
// completion window.
var errBatchExpired = errors.New("gateway: the batch's completion window expired")

// untilExpiry is how long a batch has left of its completion window (its
// expires_at; none left for one already past it, as after a restart).
func (h *Handler) untilExpiry(b *batchJob) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sb.Batch.ExpiresAt == nil {
		return time.Duration(1<<63 - 1)
	}
	return max(time.Unix(*b.sb.Batch.ExpiresAt, 0).Sub(h.opts.Now()), 0)
}

// expiredLine is the error of a batch line its completion window closed on
// before it was answered, as OpenAI writes it in the error file.
type expiredLine struct {
	ID       string    `json:"id"`
	CustomID string    `json:"custom_id"`
	Response *struct{} `json:"response"`
	Error    struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expireRest writes a batch_expired error line for every line of the
// input the job's output does not hold, and returns how many it wrote.
func (h *Handler) expireRest(id, inPath string) (int, error) {
	out, err := batch.OpenOutput(h.outputPath(id), batch.Resume) // the lines done; a torn tail cut
	if err != nil {
		return 0, err
	}
	in, err := os.Open(inPath)
	if err != nil {
		_ = out.Close()
		return 0, err
	}
	defer in.Close()
	var add []byte
	n := 0
	seen := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), int(h.files.max)+1)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.CustomID == "" || seen[l.CustomID] || out.Done(l.CustomID) {
			continue
		}
		seen[l.CustomID] = true
		e := expiredLine{ID: batch.LineID(l.CustomID), CustomID: l.CustomID}
		e.Error.Code, e.Error.Message = "batch_expired", "This request could not be executed before the completion window expired."
		line, _ := json.Marshal(&e)
		add = append(append(add, line...), '\n')
		n++
	}
	if err := out.Close(); err != nil {
		return 0, err
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	f, err := os.OpenFile(h.outputPath(id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	if _, err := f.Write(add); err != nil {
		_ = f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, err
	}
	return n, f.Close()
}

// runJob runs the batch's lines; it reports false when the Handler closed
// under it.
func (h *Handler) runJob(ctx context.Context, b *batchJob, inPath string, ks *keyState, resume bool) bool {
	id := b.sb.Batch.ID
	in, err := os.Open(inPath)
	if err != nil {
		h.log.Warn("gateway: opening a batch's input failed", "batch", id, "error", err.Error())
		return true
	}
	defer in.Close()
	mode := batch.Create
	if resume {
		mode = batch.Resume
	}
	out, err := batch.OpenOutput(h.outputPath(id), mode)
	if err != nil {
		h.log.Warn("gateway: opening a batch's output failed", "batch", id, "error", err.Error())
		return true
	}
	job := batch.Job{
		Input: in, InputName: b.sb.Batch.InputFileID, Output: out,
		Runner:      lineRunner{h: h, ks: ks, id: id},
		Concurrency: h.opts.BatchConcurrency,
		Resolve:     func(model string) (string, error) { return h.rt.Resolve(model, h.defaultProvider(formatOpenAI)) },
		Observe: func(ev batch.Event) {
			if ev.Kind != batch.EventDone && ev.Kind != batch.EventSkipped {
				return
			}
			b.mu.Lock()
			if ev.Failed {
				b.sb.Batch.RequestCounts.Failed++
			} else {
				b.sb.Batch.RequestCounts.Completed++
			}
			b.mu.Unlock()
			if ev.Native && ks != nil {
				h.chargeNative(ks, ev)
			}
		},
	}
	if n := h.opts.BatchNative; n != nil {
		job.Native = &batch.Native{Clients: n.Clients, Poll: n.Poll}
	}
	b.mu.Lock()
	b.sb.Batch.RequestCounts.Completed, b.sb.Batch.RequestCounts.Failed = 0, 0
	total := b.sb.Batch.RequestCounts.Total
	b.mu.Unlock()
	var tr *batch.Tracker
	if h.opts.Batches != nil {
		tr = h.opts.Batches.Track(id, total)
		counts := job.Observe
		job.Observe = func(ev batch.Event) {
			counts(ev)
			tr.Observe(ev)
		}
	}
	_, err = batch.Run(ctx, job)
	if tr != nil {
		tr.Finish(err)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil && ctx.Err() == nil {
		h.log.Warn("gateway: a batch job failed", "batch", id, "error", err.Error())
	}
	return h.batches.base.Err() == nil
}

// cancelRemote cancels the native batches a cancelled job left running
// and writes what they finished.
func (h *Handler) cancelRemote(b *batchJob, inPath string) {
	in, err := os.Open(inPath)
	if err != nil {
		return
	}
	defer in.Close()
	out, err := batch.OpenOutput(h.outputPath(b.sb.Batch.ID), batch.Resume)
	if err != nil {
		return
	}
	n := h.opts.BatchNative
	ctx, cancel := context.WithTimeout(h.batches.base, 2*time.Minute)
	defer cancel()
	_, err = batch.Run(ctx, batch.Job{Input: in, Output: out, Runner: lineRunner{h: h}, Native: &batch.Native{Clients: n.Clients, Poll: n.Poll, Cancel: true}})
	_ = out.Close()
	if err != nil {
		h.log.Warn("gateway: cancelling a batch's native batches failed", "batch", b.sb.Batch.ID, "error", err.Error())
	}
}

// validateBatch reads every line of a batch's input before anything runs,
// as OpenAI validates a batch: each line is JSON with a custom_id, the
// batch's endpoint as its url, and a model the key may call. It returns
// the line count, or the lines at fault (the first 100).
func (h *Handler) validateBatch(path, endpoint string, ks *keyState) (int, []openai.ServerBatchError, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	max := h.opts.MaxBatchLines
	var errs []openai.ServerBatchError
	add := func(line int, code, param, msg string) {
		if len(errs) < 100 {
			l, p := line, param
			errs = append(errs, openai.ServerBatchError{Code: code, Message: msg, Param: &p, Line: &l})
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), int(h.files.max)+1)
	n, lineNo := 0, 0
	for sc.Scan() {
		lineNo++
		if len(bytesTrim(sc.Bytes())) == 0 {
			continue
		}
		n++
		var l struct {
			CustomID string `json:"custom_id"`
			URL      string `json:"url"`
			Body     struct {
				Model string `json:"model"`
			} `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			add(lineNo, "invalid_json", "", "the line is not a JSON request object")
			continue
		}
		switch {
		case l.CustomID == "":
			add(lineNo, "missing_required_parameter", "custom_id", "custom_id is missing")
		case l.URL != endpoint:
			add(lineNo, "invalid_url", "url", fmt.Sprintf("the line's url %q is not the batch's endpoint %q", l.URL, endpoint))
		case l.Body.Model == "":
			add(lineNo, "missing_required_parameter", "body.model", "the line names no model")
		case h.opts.FanOut[l.Body.Model] != nil:
			add(lineNo, "invalid_value", "body.model", fmt.Sprintf("%q is a fan-out alias: a batch line has one answer", l.Body.Model))
		default:
			served, err := h.rt.Resolve(l.Body.Model, h.defaultProvider(formatOpenAI))
			switch {
			case err != nil:
				add(lineNo, "model_not_found", "body.model", err.Error())
			case ks != nil && !ks.allows(served) && !ks.allows(l.Body.Model):
				add(lineNo, "model_not_allowed", "body.model", fmt.Sprintf("gateway key %q may not call model %q", ks.key.Name, served))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, err
	}
	switch {
	case n == 0:
		return 0, nil, errors.New("the input file holds no request")
	case n > max:
		return 0, nil, fmt.Errorf("the input file holds %d requests (%d at most)", n, max)
	}
	return n, errs, nil
}

func bytesTrim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// splitOutput writes the job's output lines into OpenAI's two files: the
// answered lines into the output file, the failed ones into the error
// file. A file with no line is not made (its id stays null).
func (h *Handler) splitOutput(id, owner string) (outID, errID *string, counts openai.ServerBatchCounts, err error) {
	src, err := os.Open(h.outputPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, counts, nil
	}
	if err != nil {
		return nil, nil, counts, err
	}
	defer src.Close()
	type part struct {
		id  string
		f   *os.File
		w   *bufio.Writer
		n   int64
		any bool
	}
	parts := [2]*part{}
	for i := range parts {
		pid := newID("file-")
		f, err := os.OpenFile(h.files.path(pid), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, nil, counts, err
		}
		parts[i] = &part{id: pid, f: f, w: bufio.NewWriter(f)}
	}
	defer func() {
		for _, p := range parts {
			if p.f != nil {
				_ = p.f.Close()
				if !p.any || err != nil {
					_ = os.Remove(h.files.path(p.id))
				}
			}
		}
	}()
	r := bufio.NewReaderSize(src, 64<<10)
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var l struct {
				Response *struct {
					StatusCode int `json:"status_code"`
				} `json:"response"`
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &l) == nil {
				counts.Total++
				p := parts[0]
				if l.Response == nil || l.Response.StatusCode != http.StatusOK || (len(l.Error) > 0 && string(l.Error) != "null") {
					p = parts[1]
					counts.Failed++
				} else {
					counts.Completed++
				}
				if _, err := p.w.Write(line); err != nil {
					return nil, nil, counts, err
				}
				p.n += int64(len(line))
				p.any = true
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, nil, counts, rerr
		}
	}
	ids := [2]*string{}
	now := h.opts.Now().Unix()
	for i, p := range parts {
		if !p.any {
			continue
		}
		if err = p.w.Flush(); err == nil {
			err = p.f.Sync()
		}
		if err != nil {
			return nil, nil, counts, err
		}
		name := "batch_" + id + "_output.jsonl"
		if i == 1 {
			name = "batch_" + id + "_error.jsonl"
		}
		if err = h.files.add(&storedFile{File: openai.NewServerFile(p.id, name, purposeBatchOutput, p.n, now), Owner: owner}); err != nil {
			return nil, nil, counts, err
		}
		pid := p.id
		ids[i] = &pid
	}
	return ids[0], ids[1], counts, nil
}

// lineRunner runs a batch's lines on the runtime, refusing a model the
// batch's key may not call (validation refused such lines already; this
// holds for a key whose models changed since).
type lineRunner struct {
	h  *Handler
	ks *keyState
	id string // the batch's, for the request log
}

// refuse holds the line's most possible cost (est) of the key's budget,
// or refuses the line: a model its key may not call, a revoked key, a
// budget spent.
func (l lineRunner) refuse(model string, est func(*keyState) keystore.NanoUSD) (budgetHold, error) {
	if l.ks == nil {
		return budgetHold{}, nil
	}
	ks := l.ks.latest()
	if !ks.allows(model) {
		return budgetHold{}, &llm.APIError{Provider: "gateway", Status: http.StatusForbidden, Type: "permission_error", Code: "model_not_allowed",
			Message: fmt.Sprintf("gateway key %q may not call model %q", ks.key.Name, model)}
	}
	hold, e := ks.hold(l.h.opts.Now(), est(ks))
	if e != nil {
		typ := "insufficient_quota"
		if e.Code == "" {
			typ = "gateway_error"
		}
		return hold, &llm.APIError{Provider: "gateway", Status: e.Status, Type: typ, Code: e.Code, Message: e.Message}
	}
	return hold, nil
}

// Chat runs a line, charging its cost to the key's budget.
func (l lineRunner) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	hold, err := l.refuse(req.Model, func(ks *keyState) keystore.NanoUSD {
		return l.h.estimate(ks, req.Model, int64(chatBytes(req)), req.MaxTokens)
	})
	if err != nil {
		return nil, err
	}
	ctx = runtime.WithCacheNamespace(ctx, l.h.cacheNamespace(l.ks)) // cache.go
	if (l.ks == nil || l.ks.latest().key.BudgetUSD <= 0) && l.h.opts.RequestLog == nil {
		res, err := l.h.rt.Chat(ctx, req)
		hold.settle(nil)
		return res, err
	}
	rep := new(runtime.CallReport)
	lc := l.h.logLine(ctx, l.ks, l.id, "POST /v1/chat/completions", req.Model) // requestlog.go
	res, err := l.h.rt.Chat(runtime.WithCallReport(ctx, rep), req)
	lc.end(rep, resUsage(res), err)
	hold.settle(rep)
	return res, err
}

// Embed runs a line, charging its cost to the key's budget.
func (l lineRunner) Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error) {
	hold, err := l.refuse(req.Model, func(ks *keyState) keystore.NanoUSD {
		return l.h.estimate(ks, req.Model, int64(embedBytes(req)), -1)
	})
	if err != nil {
		return nil, err
	}
	if (l.ks == nil || l.ks.latest().key.BudgetUSD <= 0) && l.h.opts.RequestLog == nil {
		res, err := l.h.rt.Embed(ctx, req)
		hold.settle(nil)
		return res, err
	}
	rep := new(runtime.CallReport)
	lc := l.h.logLine(ctx, l.ks, l.id, "POST /v1/embeddings", req.Model) // requestlog.go
	res, err := l.h.rt.Embed(runtime.WithCallReport(ctx, rep), req)
	lc.end(rep, embedUsage(res), err)
	hold.settle(rep)
	return res, err
}

// chargeNative charges a line a provider's batch API answered to its
// key's budget, at the batch price of the model that answered. Native
// lines are submitted in bulk, so their budget is not reserved line by
// line: a native batch in flight may pass its key's budget by its own
// cost.
func (h *Handler) chargeNative(ks *keyState, ev batch.Event) {
	ks = ks.latest()
	if ks.key.BudgetUSD <= 0 {
		return
	}
	p, ok := h.rt.Price(ev.Served)
	if !ok {
		return
	}
	hold, e := ks.hold(h.opts.Now(), 0)
	if e != nil && ks.fl != nil {
		// Spent already: the answer is charged all the same.
		hold = budgetHold{admission{k: ks, epoch: ks.fl.epoch, period: ks.fl.period, win: -1}}
	}
	hold.settleCost(keystore.ToNano(p.Cost(ev.Usage, true)))
}
