package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stdlib is what encoding/json writes for s, HTML escaped or not.
func stdlib(t testing.TB, s string, escapeHTML bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var cases = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "<script>alert(1)</script> & more", "é ü 日本語 🙂",
	"\u2028 and \u2029", "bad \xff utf8 \xc3", "mixed <\n\u2028\xff>",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range cases {
		for _, html := range []bool{false, true} {
			if got, want := AppendString(nil, s, html), stdlib(t, s, html); !bytes.Equal(got, want) {
				t.Errorf("AppendString(%q, escapeHTML=%v) = %s, encoding/json writes %s", s, html, got, want)
			}
		}
	}
	// It appends: what b held stays.
	if got := AppendString([]byte("x:"), "y", false); string(got) != `x:"y"` {
		t.Errorf("append onto a prefix: %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range cases {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, html bool) {
		if got, want := AppendString(nil, s, html), stdlib(t, s, html); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q, %v) = %s, encoding/json writes %s", s, html, got, want)
		}
	})
}
