package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chorusrt/chorus/llm"
)

// MediaScheme prefixes the URI of every media reference: a Part whose URL
// starts with it is resolved through the session's media store before a
// model call.
const MediaScheme = "chorus-media:"

// MaxMediaBytes caps one stored image or document.
const MaxMediaBytes = 20 << 20

// MediaRef is a reference to bytes held by a MediaStore. The journal stores
// references, never bytes.
type MediaRef struct {
	// URI is MediaScheme followed by the store's key.
	URI string
	// MIMEType is the media's type ("image/png").
	MIMEType string
	// Size is the length in bytes.
	Size int64
}

// Part returns the image part that references r; the session swaps it for
// the bytes in each model request.
func (r MediaRef) Part() llm.Part {
	return llm.Part{Type: llm.PartImage, MIMEType: r.MIMEType, URL: r.URI}
}

// MediaStore holds the bytes of images and documents of user messages and
// tool results. Every process that runs the sessions of a journal needs the
// same store.
type MediaStore interface {
	// Put stores data and returns its reference.
	Put(ctx context.Context, mimeType string, data []byte) (MediaRef, error)
	// Get returns the bytes of a reference.
	Get(ctx context.Context, ref MediaRef) ([]byte, error)
}

// LocalMedia is a MediaStore in a local directory. Files are named by the
// SHA-256 of their content, so storing the same bytes twice keeps one file.
type LocalMedia struct {
	dir string
}

// NewLocalMedia returns a store in dir, created on the first Put.
func NewLocalMedia(dir string) *LocalMedia { return &LocalMedia{dir: dir} }

// defaultMediaDir is where the default LocalMedia keeps its files.
func defaultMediaDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "chorus", "media")
	}
	return filepath.Join(os.TempDir(), "chorus-media")
}

// Dir is the store's directory.
func (s *LocalMedia) Dir() string { return s.dir }

// Put writes data to a file named by its hash (atomically, through a
// temporary file and a rename) and returns "chorus-media:sha256/<hex>".
func (s *LocalMedia) Put(_ context.Context, mimeType string, data []byte) (MediaRef, error) {
	if len(data) == 0 {
		return MediaRef{}, errors.New("session: media is empty")
	}
	if len(data) > MaxMediaBytes {
		return MediaRef{}, fmt.Errorf("session: media of %d bytes is over the %d-byte limit", len(data), MaxMediaBytes)
	}
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	ref := MediaRef{URI: MediaScheme + "sha256/" + name, MIMEType: mimeType, Size: int64(len(data))}
	path := filepath.Join(s.dir, name)
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(data)) {
		return ref, nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return MediaRef{}, fmt.Errorf("session: media store: %w", err)
	}
	f, err := os.CreateTemp(s.dir, name+".tmp*")
	if err != nil {
		return MediaRef{}, fmt.Errorf("session: media store: %w", err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return MediaRef{}, fmt.Errorf("session: media store: %w", werr)
	}
	return ref, nil
}

// Get reads the file of ref.
func (s *LocalMedia) Get(_ context.Context, ref MediaRef) ([]byte, error) {
	key, ok := strings.CutPrefix(ref.URI, MediaScheme+"sha256/")
	if !ok || len(key) != 64 || strings.ContainsAny(key, `/\.`) {
		return nil, fmt.Errorf("session: media reference %q is not from a local media store", ref.URI)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, key))
	if err != nil {
		return nil, fmt.Errorf("session: media store: %w", err)
	}
	return b, nil
}

// isMediaURL reports whether a part's URL references the media store.
func isMediaURL(u string) bool { return strings.HasPrefix(u, MediaScheme) }

// storeParts replaces every part carrying inline bytes with a reference
// into the store, and returns the references of every media part.
func storeParts(ctx context.Context, ms MediaStore, parts []llm.Part) ([]llm.Part, []MediaRef, error) {
	if len(parts) == 0 {
		return nil, nil, nil
	}
	out := make([]llm.Part, len(parts))
	var refs []MediaRef
	for i, p := range parts {
		switch {
		case len(p.Data) > 0:
			mime := p.MIMEType
			if mime == "" {
				return nil, nil, &llm.ConfigError{Field: fmt.Sprintf("parts[%d].mime_type", i), Msg: "is empty"}
			}
			ref, err := ms.Put(ctx, mime, p.Data)
			if err != nil {
				return nil, nil, err
			}
			out[i] = llm.Part{Type: p.Type, MIMEType: mime, URL: ref.URI}
			refs = append(refs, ref)
		case isMediaURL(p.URL):
			out[i] = p
			refs = append(refs, MediaRef{URI: p.URL, MIMEType: p.MIMEType})
		default:
			out[i] = p
		}
	}
	return out, refs, nil
}

// loadParts returns parts with every media reference replaced by its bytes.
func loadParts(ctx context.Context, ms MediaStore, parts []llm.Part) ([]llm.Part, error) {
	var out []llm.Part
	for i, p := range parts {
		if !isMediaURL(p.URL) {
			continue
		}
		if out == nil {
			out = append([]llm.Part(nil), parts...)
		}
		b, err := ms.Get(ctx, MediaRef{URI: p.URL, MIMEType: p.MIMEType})
		if err != nil {
			return nil, err
		}
		out[i] = llm.Part{Type: p.Type, MIMEType: p.MIMEType, Data: b}
	}
	if out == nil {
		return parts, nil
	}
	return out, nil
}
