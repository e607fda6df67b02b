package providers

import (
	"net/http"
	"os"
	"regexp"
	"testing"
)

// hget looks keys up as they are, so every key meta.go reads must be in
// canonical form, as net/http stores a response's header keys.
func TestHgetKeysAreCanonical(t *testing.T) {
	src, err := os.ReadFile("meta.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`hget\(h, "([^"]+)"\)`).FindAllStringSubmatch(string(src), -1)
	if len(keys) < 20 {
		t.Fatalf("found %d keys in meta.go, want the rate-limit and retry headers", len(keys))
	}
	for _, k := range append(keys, requestIDKeys()...) {
		if c := http.CanonicalHeaderKey(k[1]); c != k[1] {
			t.Errorf("key %q is not canonical (%q): hget would never find it", k[1], c)
		}
	}
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	if got := hget(h, "X-Ratelimit-Limit-Requests"); got != "60" {
		t.Fatalf("hget = %q", got)
	}
}

func requestIDKeys() [][]string {
	var out [][]string
	for _, k := range requestIDHeaders {
		out = append(out, []string{k, k})
	}
	return out
}
