// Embeddings is an embedding pipeline: chunk documents into sentences,
// embed the chunks through a channel stage (batched requests, vectors
// placed by index), embed the queries, and print each query's nearest
// chunks by cosine similarity.
//
//	go run ./examples/embeddings                 # on the simulator
//	go run ./examples/embeddings -m openai/text-embedding-3-small "How do goroutines talk?"
//
// The simulator's vectors are hashes of the text: equal texts get equal
// vectors and anything else is unrelated, so on the simulator only a
// query quoting a chunk finds it (similarity 1). A real embedding model
// finds paraphrases too.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/runtime"
	"github.com/chorusrt/chorus/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "embeddings:", err)
		os.Exit(1)
	}
}

// docs is a small corpus.
var docs = []struct{ name, text string }{
	{"concurrency", "Goroutines are functions that run concurrently with other functions. " +
		"Channels are typed conduits through which goroutines send and receive values. " +
		"A send on an unbuffered channel blocks until a receiver is ready. " +
		"The select statement lets a goroutine wait on several channel operations."},
	{"errors", "Errors in Go are values that a function returns beside its result. " +
		"Wrapping an error with %w keeps the original for errors.Is and errors.As. " +
		"A panic is for programming mistakes, not for expected failures."},
	{"rate-limits", "Providers limit requests and tokens per minute for each key. " +
		"A 429 answer says the limit was reached and when to try again. " +
		"Pacing requests from the reported limits avoids most 429 answers. " +
		"Backoff with jitter spreads retries so they do not arrive together."},
}

// chunk is one sentence of a document.
type chunk struct {
	doc  string
	n    int
	text string
}

// sentences splits text after each ". ".
func sentences(text string) []string {
	var out []string
	for _, s := range strings.SplitAfter(text, ". ") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("embeddings", flag.ContinueOnError)
	model := fs.String("m", "sim/embed", "embedding model (provider/model or an alias)")
	dims := fs.Int("dims", 64, "vector dimensions to ask for (0: the model's default)")
	top := fs.Int("k", 3, "neighbours to show per query")
	if err := fs.Parse(args); err != nil {
		return err
	}
	queries := fs.Args()
	if len(queries) == 0 {
		queries = []string{
			"A send on an unbuffered channel blocks until a receiver is ready.", // quoted from a chunk
			"How do I avoid being rate limited?",                                // a paraphrase
		}
	}

	s, err := sim.Start(sim.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := runtime.New(runtime.WithProvider(s.Config()), runtime.FromEnv())
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())

	// Stage 1: chunk.
	var chunks []chunk
	var texts []string
	for _, d := range docs {
		for i, s := range sentences(d.text) {
			chunks = append(chunks, chunk{d.name, i, s})
			texts = append(texts, s)
		}
	}
	// Stage 2: embed, as a channel stage: 4 texts per request (a partial
	// batch waits for the input to close), items in input order.
	opts := pipeline.EmbedOptions{BatchSize: 4, Dimensions: *dims, Ordered: true, Linger: -1}
	vectors := make([][]float32, len(chunks))
	for it := range pipeline.Embed(ctx, rt, *model, pipeline.FromSlice(ctx, texts), opts) {
		if it.Err != nil {
			return fmt.Errorf("chunk %d: %w", it.Index, it.Err)
		}
		vectors[it.Index] = it.Value
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d documents, %d chunks, %d-dimension vectors from %s\n", len(docs), len(chunks), len(vectors[0]), *model)

	// Stage 3: embed the queries and rank the chunks.
	qv, err := pipeline.EmbedTexts(ctx, rt, *model, queries, opts)
	if err != nil {
		return err
	}
	for qi, q := range queries {
		type hit struct {
			score float64
			c     chunk
		}
		hits := make([]hit, len(chunks))
		for i, v := range vectors {
			hits[i] = hit{cosine(qv[qi], v), chunks[i]}
		}
		slices.SortFunc(hits, func(a, b hit) int { return -cmpFloat(a.score, b.score) })
		fmt.Fprintf(w, "\nquery: %q\n", q)
		for _, h := range hits[:min(*top, len(hits))] {
			fmt.Fprintf(w, "  %6.3f  %s#%d  %s\n", h.score, h.c.doc, h.c.n, h.c.text)
		}
	}
	var reqs int64
	for _, st := range rt.Stats() {
		reqs += st.Requests
	}
	fmt.Fprintf(w, "\n%d embedding requests\n", reqs)
	if strings.HasPrefix(*model, sim.ProviderID+"/") {
		fmt.Fprintln(w, "note: simulated vectors are hashes of the text, so only a quoted chunk is near (1.000);\n"+
			"      with OPENAI_API_KEY set, try -m openai/text-embedding-3-small for neighbours by meaning.")
	}
	return nil
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range min(len(a), len(b)) {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
