package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestEmbeddings: the chunks are embedded in batches of 4, and a query
// quoting a chunk finds that chunk first with similarity 1.
func TestEmbeddings(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"3 documents, 11 chunks, 64-dimension vectors from sim/embed",
		"query: \"A send on an unbuffered channel blocks until a receiver is ready.\"\n   1.000  concurrency#2  A send on an unbuffered channel",
		"query: \"How do I avoid being rate limited?\"",
		// 11 chunks in batches of 4 (3 requests), then the 2 queries (1).
		"\n4 embedding requests\n",
		"note: simulated vectors",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// The paraphrase matches nothing exactly.
	para := got[strings.Index(got, "query: \"How do I"):]
	if strings.Contains(para, " 1.000 ") {
		t.Errorf("a paraphrase scored 1 on hash vectors:\n%s", para)
	}
}
