package runtime

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llmtest"
)

// TestStatsFingerprint: Stats names each credential by its key's
// fingerprint, never by the key.
func TestStatsFingerprint(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithProvider(anthropicCfg(srv)))
	st := rt.Stats()
	if len(st) != 2 {
		t.Fatalf("stats: %d credentials", len(st))
	}
	if st[0].Fingerprint != fingerprint(key) || len(st[0].Fingerprint) != 16 {
		t.Fatalf("fingerprint %q, want %q", st[0].Fingerprint, fingerprint(key))
	}
	if strings.Contains(st[0].Fingerprint, key) {
		t.Fatalf("fingerprints %q %q", st[0].Fingerprint, st[1].Fingerprint)
	}
}
