package providers

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads what readCapped reads, whatever Content-Length says.
func TestReadBodyAgreesWithReadCapped(t *testing.T) {
	body := strings.Repeat("abcdefgh", 100) // 800 bytes
	for _, tc := range []struct {
		name  string
		clen  int64
		limit int64
	}{
		{"exact", 800, 1 << 20}, {"unknown", -1, 1 << 20}, {"said shorter", 500, 1 << 20},
		{"said longer", 2000, 1 << 20}, {"over the cap", 800, 700}, {"said shorter, over the cap", 500, 700},
		{"at the cap", 800, 800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func() io.Reader{
				func() io.Reader { return strings.NewReader(body) },
				func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
				func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
			} {
				got, gerr := readBody(&http.Response{ContentLength: tc.clen, Body: io.NopCloser(r())}, tc.limit)
				want, werr := readCapped(r(), tc.limit)
				if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
					t.Fatalf("readBody: %d bytes, %v; readCapped: %d bytes, %v", len(got), gerr, len(want), werr)
				}
			}
		})
	}
	// A read error mid-body is the error, never a short answer.
	boom := errors.New("reset")
	r := io.MultiReader(strings.NewReader(body[:300]), iotest.ErrReader(boom))
	if b, err := readBody(&http.Response{ContentLength: 800, Body: io.NopCloser(r)}, 1<<20); !errors.Is(err, boom) || b != nil {
		t.Fatalf("got %d bytes, %v", len(b), err)
	}
}
