package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/providers/openai"
)

// Files and batches on the fleet: with Options.KeyStore, a file's bytes
// and metadata and a batch's state live in the store, so every replica
// serves them; the files directory keeps local copies (a cache).
//
// A batch runs on one replica, under a lease in the store (fleetBatchTTL,
// renewed every fleetBatchRenew by its holder, which also reads there
// whether a client cancelled it). Its output lines are written to the
// local output file (package batch's guarantees) and appended to the
// store every fleetBatchFlush, only by the lease's holder. When the lease
// expires (the holder was killed), the fleet agent of another replica
// takes it, rebuilds the local output from the store's lines and resumes
// the job: every custom_id the store holds is skipped, the others run, so
// no line is written twice; a line answered within the last flush before
// the kill runs again (its answer never reached the store).
//
// Timing knobs; tests set them through a helper.
var (
	fleetBatchTTL   = 10 * time.Second // a batch lease not renewed this long is taken over
	fleetBatchRenew = time.Second
	fleetBatchFlush = 200 * time.Millisecond
	fleetBatchScan  = time.Second // how often the agent looks for batches to take
)

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// storedFileOf is a store file as the gateway serves it.
func storedFileOf(f keystore.File) *storedFile {
	return &storedFile{File: openai.NewServerFile(f.ID, f.Filename, f.Purpose, f.Bytes, f.Created), Owner: f.Owner}
}

// storeGet is fileStore.get on the store; a file deleted through another
// replica loses its local copy.
func (fs *fileStore) storeGet(id, owner string) (*storedFile, bool) {
	ctx, cancel := storeCtx()
	defer cancel()
	f, err := fs.st.File(ctx, id)
	if errors.Is(err, keystore.ErrNoFile) {
		fs.mu.Lock()
		delete(fs.files, id)
		dir := fs.dir
		fs.mu.Unlock()
		if dir != "" {
			_ = os.Remove(filepath.Join(dir, id))
		}
		return nil, false
	}
	if err != nil || f.Owner != owner {
		return nil, false
	}
	return storedFileOf(f), true
}

// storePut copies a file the gateway wrote at fs.path(id) into the store.
func (fs *fileStore) storePut(sf *storedFile) error {
	b, err := os.ReadFile(fs.path(sf.File.ID))
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx()
	defer cancel()
	return fs.st.PutFile(ctx, keystore.File{ID: sf.File.ID, Owner: sf.Owner, Purpose: sf.File.Purpose, Filename: sf.File.Filename,
		Bytes: sf.File.Bytes, Created: sf.File.CreatedAt}, b)
}

func (fs *fileStore) storeList(owner, purpose string) []openai.ServerFile {
	ctx, cancel := storeCtx()
	defer cancel()
	files, err := fs.st.Files(ctx, owner, purpose)
	if err != nil {
		return nil
	}
	out := make([]openai.ServerFile, len(files))
	for i, f := range files {
		out[i] = storedFileOf(f).File
	}
	return out
}

// local returns the path of a local copy of file id, fetching it from the
// store when this replica has none.
func (fs *fileStore) local(id string) (string, error) {
	p := fs.path(id)
	if fs.st == nil {
		return p, nil
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := fs.ensure(); err != nil {
		return "", err
	}
	p = fs.path(id)
	ctx, cancel := storeCtx()
	defer cancel()
	b, err := fs.st.FileContent(ctx, id)
	if err != nil {
		return "", err
	}
	return p, writeAtomic(p, b)
}

// writeAtomic writes b to path through a temporary file of its own (so
// that replicas' requests fetching one file at once do not clash).
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// viewOf is a store batch as clients see it: a cancel asked through any
// replica shows at once, before its holder has seen it.
func viewOf(sb keystore.Batch) (storedBatch, error) {
	var st storedBatch
	if err := json.Unmarshal(sb.State, &st); err != nil {
		return st, err
	}
	if sb.Cancel > 0 && !sb.Done && !st.Batch.Terminal() && !st.Cancel {
		st.Cancel, st.Batch.Status = true, "cancelling"
		at := sb.Cancel
		st.Batch.CancellingAt = &at
	}
	return st, nil
}

// storeBatch finds owner's batch id in the store.
func (h *Handler) storeBatch(id, owner string) (storedBatch, keystore.Batch, bool) {
	if !validID(id, "batch_") {
		return storedBatch{}, keystore.Batch{}, false
	}
	ctx, cancel := storeCtx()
	defer cancel()
	b, err := h.opts.KeyStore.Batch(ctx, id)
	if err != nil || b.Owner != owner {
		return storedBatch{}, b, false
	}
	sb, err := viewOf(b)
	return sb, b, err == nil
}

// fleetBatch serves GET /v1/batches/{id} and POST .../cancel from the
// store.
func (h *Handler) fleetBatch(w http.ResponseWriter, r *http.Request, cancelIt bool) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, formatOpenAI, e)
		return
	}
	id := r.PathValue("id")
	sb, _, ok := h.storeBatch(id, ownerOf(ks))
	if !ok {
		h.fail(w, formatOpenAI, &Error{Status: http.StatusNotFound, Message: "no such batch: " + clipID(id)})
		return
	}
	if cancelIt {
		if sb.Batch.Terminal() {
			h.fail(w, formatOpenAI, &Error{Status: http.StatusConflict, Message: "batch " + sb.Batch.ID + " is " + sb.Batch.Status + ": it cannot be cancelled"})
			return
		}
		ctx, cancel := storeCtx()
		b, err := h.opts.KeyStore.CancelBatch(ctx, id, h.opts.Now())
		cancel()
		if err != nil {
			h.log.Warn("gateway: key store: cancelling a batch failed", "batch", id, "error", err.Error())
			h.fail(w, formatOpenAI, &Error{Status: http.StatusServiceUnavailable, Message: "the store cannot be reached to cancel the batch; retry shortly", RetryAfter: time.Second})
			return
		}
		if sb, err = viewOf(b); err != nil {
			h.fail(w, formatOpenAI, &Error{Status: http.StatusInternalServerError, Message: "reading the batch failed"})
			return
		}
		h.batches.mu.Lock()
		local := h.batches.jobs[id]
		h.batches.mu.Unlock()
		if local != nil { // running here: no need to wait for the renewal
			h.applyCancel(local, b.Cancel)
		}
	}
	out, _ := json.Marshal(sb.Batch)
	h.writeJSON(w, out)
}

// storeBatches is owner's batches in the store, newest first.
func (h *Handler) storeBatches(owner string) []openai.ServerBatch {
	ctx, cancel := storeCtx()
	defer cancel()
	bs, err := h.opts.KeyStore.Batches(ctx, owner)
	if err != nil {
		return nil
	}
	out := make([]openai.ServerBatch, 0, len(bs))
	for _, b := range bs {
		if sb, err := viewOf(b); err == nil {
			out = append(out, sb.Batch)
		}
	}
	return out
}

// applyCancel cancels a batch running on this replica (cancel asked at
// at, Unix seconds).
func (h *Handler) applyCancel(b *batchJob, at int64) {
	b.mu.Lock()
	apply := !b.sb.Batch.Terminal() && !b.sb.Cancel
	if apply {
		b.sb.Cancel, b.sb.Batch.Status = true, "cancelling"
		b.sb.Batch.CancellingAt = &at
	}
	stop := b.cancel
	b.mu.Unlock()
	if apply {
		h.save(b)
		if stop != nil {
			stop()
		}
	}
}

// fleetCreate stores a new batch, its lease held by this replica.
func (h *Handler) fleetCreate(b *batchJob) error {
	b.mu.Lock()
	data, err := json.Marshal(&b.sb)
	kb := keystore.Batch{ID: b.sb.Batch.ID, Owner: b.sb.Owner, Created: b.sb.Batch.CreatedAt, State: data}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx()
	defer cancel()
	return h.opts.KeyStore.CreateBatch(ctx, kb, h.fleet.replica, h.opts.Now().Add(fleetBatchTTL))
}

// fleetSave is save on the store; a lease lost stops the job here.
func (h *Handler) fleetSave(b *batchJob) {
	b.mu.Lock()
	data, err := json.Marshal(&b.sb)
	id, done := b.sb.Batch.ID, b.sb.Batch.Terminal()
	b.mu.Unlock()
	if err != nil {
		return
	}
	ctx, cancel := storeCtx()
	defer cancel()
	err = h.opts.KeyStore.SaveBatch(ctx, id, h.fleet.replica, data, done)
	switch {
	case errors.Is(err, keystore.ErrLeaseLost):
		h.loseBatch(b)
	case err != nil:
		h.log.Warn("gateway: key store: saving a batch failed", "batch", id, "error", err.Error())
	}
}

// loseBatch stops a job whose lease another replica holds now.
func (h *Handler) loseBatch(b *batchJob) {
	if b.lost.Swap(true) {
		return
	}
	b.mu.Lock()
	stop, id := b.cancel, b.sb.Batch.ID
	b.mu.Unlock()
	h.log.Warn("gateway: this replica lost a batch's lease (another runs it now): stopping it here", "batch", id)
	if stop != nil {
		stop()
	}
}

// mirror runs beside a batch's job on the fleet until done closes: it
// appends the output's new whole lines to the store every
// fleetBatchFlush (with the batch's state when it changed), renews the
// lease every fleetBatchRenew and applies a cancel asked through any
// replica. At the end it flushes what is left and, when the job stopped
// unfinished because the Handler closed, releases the lease so another
// replica takes it at once.
func (h *Handler) mirror(b *batchJob, offset int64, done <-chan struct{}) {
	st, replica := h.opts.KeyStore, h.fleet.replica
	id := b.sb.Batch.ID
	var saved []byte
	flush := func() {
		if b.lost.Load() {
			return
		}
		n, err := h.flushOutput(id, offset)
		offset += n
		if errors.Is(err, keystore.ErrLeaseLost) {
			h.loseBatch(b)
			return
		}
		if err != nil {
			h.log.Warn("gateway: key store: writing a batch's output lines failed; retried", "batch", id, "error", err.Error())
		}
		b.mu.Lock()
		data, _ := json.Marshal(&b.sb)
		terminal := b.sb.Batch.Terminal()
		b.mu.Unlock()
		if !terminal && string(data) != string(saved) {
			h.fleetSave(b)
			saved = data
		}
	}
	renew := func() {
		ctx, cancel := storeCtx()
		at, err := st.RenewBatch(ctx, id, replica, h.opts.Now(), fleetBatchTTL)
		cancel()
		switch {
		case errors.Is(err, keystore.ErrLeaseLost):
			b.mu.Lock()
			terminal := b.sb.Batch.Terminal()
			b.mu.Unlock()
			if !terminal {
				h.loseBatch(b)
			}
		case err == nil && at > 0:
			h.applyCancel(b, at)
		}
	}
	tick := time.NewTicker(fleetBatchFlush)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-done:
			if h.batches.killed.Load() {
				return // a test's kill: nothing more reaches the store
			}
			b.mu.Lock()
			terminal := b.sb.Batch.Terminal()
			b.mu.Unlock()
			if !terminal && !b.lost.Load() {
				flush()
				ctx, cancel := storeCtx()
				_ = st.ReleaseBatch(ctx, id, replica)
				cancel()
			}
			return
		case <-tick.C:
			flush()
			if now := time.Now(); now.Sub(last) >= fleetBatchRenew {
				last = now
				renew()
			}
		}
	}
}

// flushOutput appends the whole lines of the local output past offset to
// the store, and returns how many bytes it appended.
func (h *Handler) flushOutput(id string, offset int64) (int64, error) {
	f, err := os.Open(h.outputPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	var n int64
	buf := make([]byte, 4<<20)
	var carry []byte
	for {
		m, rerr := f.Read(buf)
		data := append(carry, buf[:m]...)
		end := lastNewline(data)
		if end > 0 && (len(data) >= 1<<20 || rerr != nil) {
			ctx, cancel := storeCtx()
			err := h.opts.KeyStore.AppendBatchOutput(ctx, id, h.fleet.replica, data[:end])
			cancel()
			if err != nil {
				return n, err
			}
			n += int64(end)
			data = data[end:]
		}
		carry = append([]byte(nil), data...)
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

func lastNewline(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			return i + 1
		}
	}
	return 0
}

// takeBatches is the fleet agent's look for batches whose lease is free
// or expired (their holder closed or died): it takes them and resumes
// them here.
func (h *Handler) takeBatches(ctx context.Context, now time.Time) {
	if h.batches.base.Err() != nil || h.batches.killed.Load() {
		return
	}
	for range 4 {
		kb, ok, err := h.opts.KeyStore.TakeBatch(ctx, h.fleet.replica, now, fleetBatchTTL)
		if err != nil || !ok {
			return
		}
		if err := h.resumeTaken(kb); err != nil {
			h.log.Warn("gateway: resuming a batch taken over failed; released", "batch", kb.ID, "error", err.Error())
			rctx, cancel := storeCtx()
			_ = h.opts.KeyStore.ReleaseBatch(rctx, kb.ID, h.fleet.replica)
			cancel()
			return
		}
	}
}

// resumeTaken rebuilds a taken batch's local output from the store's
// lines and resumes its job.
func (h *Handler) resumeTaken(kb keystore.Batch) error {
	sb, err := viewOf(kb)
	if err != nil {
		return err
	}
	h.batches.mu.Lock()
	old := h.batches.jobs[kb.ID]
	h.batches.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		running := old.cancel != nil && !old.lost.Load()
		old.mu.Unlock()
		if running {
			return nil // still ours, running
		}
	}
	if err := h.files.ensure(); err != nil {
		return err
	}
	ctx, cancel := storeCtx()
	out, err := h.opts.KeyStore.BatchOutput(ctx, kb.ID)
	cancel()
	if err != nil {
		return err
	}
	if err := writeAtomic(h.outputPath(kb.ID), out); err != nil {
		return err
	}
	b := &batchJob{sb: sb}
	h.batches.mu.Lock()
	defer h.batches.mu.Unlock()
	if h.batches.base.Err() != nil {
		return errors.New("the gateway is closing")
	}
	h.batches.jobs[kb.ID] = b
	h.log.Info("gateway: resuming a batch another replica left", "batch", kb.ID, "lines_done_bytes", len(out))
	h.startBatchLocked(b, true, int64(len(out)))
	return nil
}

// importLocal moves into the store what the files directory kept before
// the Handler had one: its files, and its batches with their output lines
// so far (an unfinished one is then taken by the agent and resumed). An
// id the store holds already is left as the store has it.
func (h *Handler) importLocal() {
	st, fs := h.opts.KeyStore, h.files
	fs.mu.Lock()
	files := make([]*storedFile, 0, len(fs.files))
	for _, sf := range fs.files {
		files = append(files, sf)
	}
	fs.mu.Unlock()
	for _, sf := range files {
		if err := fs.storePut(sf); err != nil && !errors.Is(err, keystore.ErrConflict) {
			h.log.Warn("gateway: key store: importing a file of the files directory failed", "file", sf.File.ID, "error", err.Error())
		}
	}
	paths, _ := filepath.Glob(filepath.Join(fs.dir, "batch_*.json"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		var sb storedBatch
		if err != nil || json.Unmarshal(data, &sb) != nil || !validID(sb.Batch.ID, "batch_") {
			continue
		}
		if err := h.importBatch(st, &sb, data); err != nil && !errors.Is(err, keystore.ErrConflict) {
			h.log.Warn("gateway: key store: importing a batch of the files directory failed", "batch", sb.Batch.ID, "error", err.Error())
		}
	}
}

func (h *Handler) importBatch(st *keystore.Store, sb *storedBatch, state []byte) error {
	ctx, cancel := storeCtx()
	defer cancel()
	id, replica := sb.Batch.ID, h.fleet.replica
	kb := keystore.Batch{ID: id, Owner: sb.Owner, Created: sb.Batch.CreatedAt, Done: sb.Batch.Terminal(), State: state}
	if err := st.CreateBatch(ctx, kb, replica, h.opts.Now().Add(fleetBatchTTL)); err != nil {
		return err
	}
	if !kb.Done {
		out, err := os.ReadFile(h.outputPath(id))
		if end := lastNewline(out); err == nil && end > 0 {
			if err := st.AppendBatchOutput(ctx, id, replica, out[:end]); err != nil {
				return err
			}
		}
	}
	return st.ReleaseBatch(ctx, id, replica)
}
