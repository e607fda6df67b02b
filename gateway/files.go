package gateway

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/providers/openai"
)

// DefaultMaxFileBytes caps an uploaded file when Options.MaxFileBytes is
// zero (OpenAI's own limit for batch input files).
const DefaultMaxFileBytes = 200 << 20

// Purposes of the files the gateway keeps.
const (
	purposeBatch       = "batch"
	purposeBatchOutput = "batch_output"
)

// storedFile is a file's object and its owner (the name of the gateway
// key that uploaded it, or whose batch wrote it; "" without keys). It is
// kept next to the file's bytes as <id>.json.
type storedFile struct {
	File  openai.ServerFile `json:"file"`
	Owner string            `json:"owner"`
}

// fileStore keeps uploaded batch inputs and batch outputs in a directory:
// <id> holds the bytes, <id>.json the object. Ids are "file-" and 128
// random bits: they cannot be guessed, and an id names a file of its
// owner only (another key's file is "not found").
type fileStore struct {
	dir  string
	temp bool // made by the gateway: removed by Close
	max  int64

	mu    sync.Mutex
	files map[string]*storedFile
	// st, when set (Options.KeyStore), holds every file: fleetfiles.go.
	st *keystore.Store
}

// openFileStore opens dir (made if missing), or a new temporary directory
// when dir is empty, and reads the files it holds.
func openFileStore(dir string, max int64) (*fileStore, error) {
	fs := &fileStore{dir: dir, max: max, files: map[string]*storedFile{}}
	if dir == "" {
		return fs, nil // a temporary directory, made at the first upload
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: files directory: %w", err)
	}
	metas, err := filepath.Glob(filepath.Join(dir, "file-*.json"))
	if err != nil {
		return nil, err
	}
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("gateway: files directory: %w", err)
		}
		var sf storedFile
		if err := json.Unmarshal(b, &sf); err != nil || !validID(sf.File.ID, "file-") {
			continue // not ours, or cut short before it was complete
		}
		if _, err := os.Stat(fs.path(sf.File.ID)); err == nil {
			fs.files[sf.File.ID] = &sf
		}
	}
	return fs, nil
}

// ensure makes the temporary directory of a store opened without one.
func (fs *fileStore) ensure() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.dir != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "chorus-gateway-files-")
	if err != nil {
		return fmt.Errorf("gateway: files directory: %w", err)
	}
	fs.dir, fs.temp = d, true
	return nil
}

func (fs *fileStore) close() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.temp {
		_ = os.RemoveAll(fs.dir)
	}
}

// newID is prefix and 128 random bits in base32 (26 characters).
func newID(prefix string) string { return prefix + rand.Text() }

// validID reports whether id is one newID could have made: it is used as
// a file name, so nothing else may reach the file system.
func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != 26 {
		return false
	}
	for _, c := range rest {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

func (fs *fileStore) path(id string) string { return filepath.Join(fs.dir, id) }

// get returns owner's file id.
func (fs *fileStore) get(id, owner string) (*storedFile, bool) {
	if !validID(id, "file-") {
		return nil, false
	}
	if fs.st != nil {
		return fs.storeGet(id, owner)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sf, ok := fs.files[id]
	if !ok || sf.Owner != owner {
		return nil, false
	}
	return sf, true
}

// add records a file whose bytes are at fs.path(id).
func (fs *fileStore) add(sf *storedFile) error {
	b, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	if err := writeFileSync(fs.path(sf.File.ID)+".json", b); err != nil {
		return err
	}
	if fs.st != nil {
		if err := fs.storePut(sf); err != nil {
			_ = os.Remove(fs.path(sf.File.ID) + ".json")
			return err
		}
	}
	fs.mu.Lock()
	fs.files[sf.File.ID] = sf
	fs.mu.Unlock()
	return nil
}

func (fs *fileStore) remove(id string) error {
	if fs.st != nil {
		ctx, cancel := storeCtx()
		err := fs.st.DeleteFile(ctx, id)
		cancel()
		if err != nil && !errors.Is(err, keystore.ErrNoFile) {
			return err
		}
	}
	fs.mu.Lock()
	delete(fs.files, id)
	fs.mu.Unlock()
	_ = os.Remove(fs.path(id) + ".json")
	_ = os.Remove(fs.path(id))
	return nil
}

// list returns owner's files, newest first.
func (fs *fileStore) list(owner, purpose string) []openai.ServerFile {
	if fs.st != nil {
		return fs.storeList(owner, purpose)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []openai.ServerFile
	for _, sf := range fs.files {
		if sf.Owner == owner && (purpose == "" || sf.File.Purpose == purpose) {
			out = append(out, sf.File)
		}
	}
	slices.SortFunc(out, func(a, b openai.ServerFile) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// writeFileSync writes a small file through a temporary name, synced, so
// a crash leaves the old content or the new, never a part.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func ownerOf(ks *keyState) string {
	if ks == nil {
		return ""
	}
	return ks.key.Name
}

// uploadFile serves POST /v1/files: a multipart form with the file and
// purpose=batch, in either order. The file is streamed to disk, at most
// Options.MaxFileBytes.
func (h *Handler) uploadFile(w http.ResponseWriter, r *http.Request) {
	const f = formatOpenAI
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	fs := h.files
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "POST /v1/files takes multipart/form-data (file, purpose)"})
		return
	}
	if err := fs.ensure(); err != nil {
		h.log.Warn("gateway: making the files directory failed", "error", err.Error())
		h.fail(w, f, &Error{Status: http.StatusInternalServerError, Message: "storing the file failed"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, fs.max+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "reading the form: " + err.Error()})
		return
	}
	id := newID("file-")
	var (
		purpose, filename string
		size              int64
		gotFile           bool
	)
	cleanup := func() { _ = os.Remove(fs.path(id)) }
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			cleanup()
			h.fail(w, f, uploadError(err, fs.max))
			return
		}
		switch p.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(p, 64))
			if err != nil {
				cleanup()
				h.fail(w, f, uploadError(err, fs.max))
				return
			}
			purpose = strings.TrimSpace(string(b))
		case "file":
			if gotFile {
				cleanup()
				h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "the form holds two files"})
				return
			}
			gotFile, filename = true, filepath.Base(p.FileName())
			if size, err = fs.write(id, p); err != nil {
				cleanup()
				h.fail(w, f, uploadError(err, fs.max))
				return
			}
		}
		_ = p.Close()
	}
	switch {
	case !gotFile:
		cleanup()
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "the form has no file"})
		return
	case purpose != purposeBatch:
		cleanup()
		h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("purpose %q is not served (batch only)", purpose)})
		return
	}
	sf := &storedFile{File: openai.NewServerFile(id, filename, purpose, size, h.opts.Now().Unix()), Owner: ownerOf(ks)}
	if err := fs.add(sf); err != nil {
		cleanup()
		h.log.Warn("gateway: storing a file failed", "error", err.Error())
		h.fail(w, f, &Error{Status: http.StatusInternalServerError, Message: "storing the file failed"})
		return
	}
	b, _ := json.Marshal(sf.File)
	h.writeJSON(w, b)
}

// errTooLarge is a file past the store's cap.
var errTooLarge = errors.New("file too large")

func uploadError(err error, max int64) *Error {
	var mb *http.MaxBytesError
	if errors.Is(err, errTooLarge) || errors.As(err, &mb) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("a file holds %d bytes at most", max)}
	}
	return &Error{Status: http.StatusBadRequest, Message: "reading the upload failed"}
}

// write streams r to id's path, synced, at most fs.max bytes.
func (fs *fileStore) write(id string, r io.Reader) (int64, error) {
	out, err := os.OpenFile(fs.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(r, fs.max+1))
	if err == nil && n > fs.max {
		err = errTooLarge
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// fileOf authenticates a request about file {id} and finds it.
func (h *Handler) fileOf(w http.ResponseWriter, r *http.Request) (*storedFile, bool) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, formatOpenAI, e)
		return nil, false
	}
	id := r.PathValue("id")
	sf, ok := h.files.get(id, ownerOf(ks))
	if !ok {
		h.fail(w, formatOpenAI, &Error{Status: http.StatusNotFound, Message: "no such file: " + clipID(id)})
		return nil, false
	}
	return sf, true
}

func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}

// getFile serves GET /v1/files/{id}.
func (h *Handler) getFile(w http.ResponseWriter, r *http.Request) {
	if sf, ok := h.fileOf(w, r); ok {
		b, _ := json.Marshal(sf.File)
		h.writeJSON(w, b)
	}
}

// fileContent serves GET /v1/files/{id}/content.
func (h *Handler) fileContent(w http.ResponseWriter, r *http.Request) {
	sf, ok := h.fileOf(w, r)
	if !ok {
		return
	}
	p, err := h.files.local(sf.File.ID) // a copy from the store on the fleet
	if err != nil {
		h.fail(w, formatOpenAI, &Error{Status: http.StatusNotFound, Message: "no such file: " + sf.File.ID})
		return
	}
	f, err := os.Open(p)
	if err != nil {
		h.fail(w, formatOpenAI, &Error{Status: http.StatusNotFound, Message: "no such file: " + sf.File.ID})
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", h.opts.Now(), f)
}

// deleteFile serves DELETE /v1/files/{id}. A batch's running input is
// not deleted under it: the job holds the file open.
func (h *Handler) deleteFile(w http.ResponseWriter, r *http.Request) {
	if sf, ok := h.fileOf(w, r); ok {
		if err := h.files.remove(sf.File.ID); err != nil {
			h.log.Warn("gateway: key store: deleting a file failed", "error", err.Error())
			h.fail(w, formatOpenAI, &Error{Status: http.StatusServiceUnavailable, Message: "the store cannot be reached to delete the file; retry shortly", RetryAfter: time.Second})
			return
		}
		h.writeJSON(w, openai.EncodeServerDeleted(sf.File.ID, "file"))
	}
}

// listFiles serves GET /v1/files (?purpose=).
func (h *Handler) listFiles(w http.ResponseWriter, r *http.Request) {
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, formatOpenAI, e)
		return
	}
	files := h.files.list(ownerOf(ks), r.URL.Query().Get("purpose"))
	writeList(h, w, files, func(f *openai.ServerFile) string { return f.ID }, false)
}
