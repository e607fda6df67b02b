package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/runtime"
)

const batchUsage = `usage: chorus batch -i IN.jsonl -o OUT.jsonl [flags]

Runs every line of an OpenAI Batch input file through the runtime and writes
one OpenAI Batch output line per custom_id.

  -i, --input FILE        input JSONL ("-" reads stdin)
  -o, --output FILE       output JSONL (appended line by line)
  -c, --concurrency N     requests in flight at most (default 32); pacing
                          within that comes from each provider's limits
      --model M           model for chat lines whose body names none
      --embed-model M     model for embedding lines whose body names none
      --resume            finish an interrupted output: skip the custom_ids
                          already in it, cut an unterminated last line
      --overwrite         start again over an existing non-empty output
      --config FILE       chorus.yaml: aliases, providers, limits, defaults, sim
      --cluster NAME      spread the lines over the members of a Chorus
                          cluster (chorus node) instead of calling from here;
                          this process joins as a client and alone writes
                          the output, so resume works as without a cluster
      --peers LIST        the cluster's member addresses, comma-separated
      --bind HOST:PORT    this client's actor address (default: a free
                          loopback port)

Exit status: 0 all succeeded, 1 some item failed or an input line was bad,
2 usage or setup error, 130 interrupted (run again with --resume).
`

// batchOpts are the flags of chorus batch.
type batchOpts struct {
	in, out, model, embedModel, config string
	cluster, peers, bind               string
	concurrency                        int
	resume, overwrite                  bool
}

func parseBatchFlags(e env, args []string) (*batchOpts, error) {
	o := &batchOpts{}
	fs := flag.NewFlagSet("chorus batch", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, batchUsage) }
	fs.StringVar(&o.in, "i", "", "")
	fs.StringVar(&o.in, "input", "", "")
	fs.StringVar(&o.out, "o", "", "")
	fs.StringVar(&o.out, "output", "", "")
	fs.StringVar(&o.cluster, "cluster", "", "")
	fs.StringVar(&o.peers, "peers", "", "")
	fs.StringVar(&o.bind, "bind", "", "")
	fs.IntVar(&o.concurrency, "c", 32, "")
	fs.IntVar(&o.concurrency, "concurrency", 32, "")
	fs.StringVar(&o.model, "model", "", "")
	fs.StringVar(&o.model, "m", "", "")
	fs.StringVar(&o.embedModel, "embed-model", "", "")
	fs.BoolVar(&o.resume, "resume", false, "")
	fs.BoolVar(&o.overwrite, "overwrite", false, "")
	fs.StringVar(&o.config, "config", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q (flags only; see chorus batch -h)", fs.Arg(0))
	case o.in == "":
		return nil, errors.New("-i is required: the input JSONL file")
	case o.out == "":
		return nil, errors.New("-o is required: the output JSONL file")
	case o.concurrency < 1:
		return nil, fmt.Errorf("-c must be at least 1, got %d", o.concurrency)
	case o.resume && o.overwrite:
		return nil, errors.New("--resume and --overwrite exclude each other")
	case o.in != "-" && sameFile(o.in, o.out):
		return nil, fmt.Errorf("-o %s is the input file", o.out)
	case o.cluster == "" && (o.peers != "" || o.bind != ""):
		return nil, errors.New("--peers and --bind need --cluster")
	case o.cluster != "" && len(splitList(o.peers)) == 0:
		return nil, errors.New("--cluster needs --peers: the members' addresses")
	}
	return o, nil
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// jobKind is what an input line asks for.
type jobKind uint8

const (
	jobBad jobKind = iota
	jobChat
	jobEmbed
)

// job is one input line.
type job struct {
	line     int
	customID string
	kind     jobKind
	model    string // as named: provider/model or an alias
	chat     *llm.ChatRequest
	embed    *llm.EmbedRequest
	b64      bool
	err      error // jobBad: what is wrong with the line
}

// result is one finished job.
type result struct {
	job       *job
	out       []byte // the output line; nil when nothing is written
	failed    bool
	cancelled bool
	usage     llm.Usage
	err       error
	start     time.Time
	end       time.Time
}

// modelStat is one row of the summary.
type modelStat struct {
	requests, failed int
	tokens           int64
	first, last      time.Time
}

// batchRun is one chorus batch.
type batchRun struct {
	e     env
	o     *batchOpts
	st    *stack
	prog  *progress
	dflt  map[bool]defaultPick
	dmu   sync.Mutex
	start time.Time
	// chat and embed run a line: on the local runtime, or on the
	// cluster's members.
	chat  func(context.Context, *llm.ChatRequest) (*llm.ChatResult, error)
	embed func(context.Context, *llm.EmbedRequest) (*llm.EmbedResult, error)
}

type defaultPick struct {
	model, why string
	err        error
}

func cmdBatch(ctx context.Context, e env, args []string) int {
	o, err := parseBatchFlags(e, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !isFlagPkgErr(err) {
			fmt.Fprintf(e.stderr, "chorus batch: %v\n", err)
		}
		return 2
	}
	return runBatch(ctx, e, o)
}

// isFlagPkgErr reports errors the flag package has already printed.
func isFlagPkgErr(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") || strings.HasPrefix(s, "invalid value") ||
		strings.HasPrefix(s, "flag needs an argument") || strings.HasPrefix(s, "bad flag syntax")
}

func runBatch(ctx context.Context, e env, o *batchOpts) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "chorus batch: "+format+"\n", args...)
		return 2
	}
	var in io.Reader
	total := 0
	if o.in == "-" {
		in = e.stdin
	} else {
		f, err := os.Open(o.in)
		if err != nil {
			return fail("-i: %v", err)
		}
		defer f.Close()
		if total, err = countLines(f); err != nil {
			return fail("-i %s: %v", o.in, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fail("-i %s: %v", o.in, err)
		}
		in = f
	}
	// Every worker may wait in one credential's admission queue: make
	// room for all of them, so a high -c is paced, never refused.
	st, err := openStack(e, o.config, runtime.WithQueueSize(max(1024, o.concurrency)))
	if err != nil {
		return fail("%v", err)
	}
	defer st.close(5 * time.Second)
	for flagName, m := range map[string]string{"--model": o.model, "--embed-model": o.embedModel} {
		if m != "" {
			if err := st.checkModel(m); err != nil {
				return fail("%s %s: %v", flagName, m, err)
			}
		}
	}
	out, rs, err := openOutput(o.out, o.resume, o.overwrite)
	if err != nil {
		return fail("%v", err)
	}
	if rs.cut > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: %s: cut an unterminated last line (%d bytes) left by an interrupted run\n", o.out, rs.cut)
	}
	if o.resume && len(rs.done) > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: resuming: %d custom_id(s) already in %s are skipped\n", len(rs.done), o.out)
	}
	b := &batchRun{e: e, o: o, st: st, dflt: map[bool]defaultPick{}, start: time.Now(), chat: st.rt.Chat, embed: st.rt.Embed}
	if o.cluster != "" {
		n, err := joinCluster(ctx, o)
		if err != nil {
			return fail("--cluster %s: %v", o.cluster, err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = n.Close(cctx)
		}()
		b.chat, b.embed = n.Chat, n.Embed
		fmt.Fprintf(e.stderr, "chorus batch: lines go to cluster %q (%d members)\n", o.cluster, len(n.Members()))
	}
	b.prog = newProgress(e.stderr, e.stderrTTY, e.width, total)
	code := b.run(ctx, in, out, rs)
	if err := out.close(); err != nil {
		fmt.Fprintf(e.stderr, "chorus batch: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// joinCluster joins o.cluster as a client and waits (up to 30s) for a
// member to answer.
func joinCluster(ctx context.Context, o *batchOpts) (*cluster.Node, error) {
	peers := splitList(o.peers)
	if len(peers) == 0 {
		return nil, errors.New("--peers names no member")
	}
	bind := o.bind
	if bind == "" {
		var err error
		if bind, err = freeBind(); err != nil {
			return nil, err
		}
	}
	n, err := cluster.Join(ctx, cluster.Config{Name: o.cluster, Bind: bind, Peers: peers, Client: true})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.WaitMembers(wctx, 1); err != nil {
		_ = n.Close(context.Background())
		return nil, err
	}
	return n, nil
}

// countLines counts non-blank lines.
func countLines(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if len(bytes.TrimSpace(line)) > 0 && (err == nil || err == io.EOF || errors.Is(err, bufio.ErrBufferFull)) {
			n++
			for errors.Is(err, bufio.ErrBufferFull) { // a long line: skip its rest
				_, err = br.ReadSlice('\n')
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return 0, err
		}
	}
}

func (b *batchRun) run(ctx context.Context, in io.Reader, out *outFile, rs *resumeState) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *job)
	var readErr error
	var readDone sync.WaitGroup
	var skipped int
	readDone.Add(1)
	go func() {
		defer readDone.Done()
		defer close(jobs)
		skipped, readErr = b.read(ctx, in, rs.done, jobs)
	}()
	items := pipeline.Map(ctx, jobs, func(ctx context.Context, j *job) (*result, llm.Usage, error) {
		r := b.do(ctx, j)
		return r, r.usage, nil
	}, pipeline.BatchOptions{Concurrency: b.o.concurrency})

	stats := map[string]*modelStat{}
	var order []string
	var badLines []int
	written, succeeded, failed, cancelled := 0, 0, 0, 0
	var writeErr error
	for it := range items {
		r := it.Value
		if it.Err != nil || r == nil { // a panic in b.do: a bug, reported as such
			failed++
			b.prog.item(true, 0)
			b.prog.logf("chorus batch: internal error: %v", it.Err)
			continue
		}
		if r.cancelled {
			cancelled++
			continue
		}
		if r.out != nil && writeErr == nil {
			if writeErr = out.write(r.out); writeErr != nil {
				cancel()
			} else {
				written++
			}
		}
		tokens := r.usage.TotalTokens()
		b.prog.item(r.failed, tokens)
		if r.job.kind == jobBad {
			badLines = append(badLines, r.job.line)
			if len(badLines) <= 20 {
				b.prog.logf("chorus batch: %s:%d: %v", b.o.in, r.job.line, r.job.err)
			}
			continue
		}
		ms := stats[r.job.model]
		if ms == nil {
			ms = &modelStat{first: r.start}
			stats[r.job.model] = ms
			order = append(order, r.job.model)
		}
		ms.requests++
		ms.tokens += int64(tokens)
		if r.start.Before(ms.first) {
			ms.first = r.start
		}
		if r.end.After(ms.last) {
			ms.last = r.end
		}
		if r.failed {
			ms.failed++
			failed++
		} else {
			succeeded++
		}
	}
	readDone.Wait()
	b.prog.finish()

	e := b.e
	interrupted := ctx.Err() != nil && writeErr == nil
	fmt.Fprintf(e.stderr, "chorus batch: %s in %s: %d succeeded, %d failed",
		map[bool]string{true: "interrupted", false: "finished"}[interrupted], time.Since(b.start).Round(time.Millisecond), succeeded, failed)
	if len(badLines) > 0 {
		fmt.Fprintf(e.stderr, ", %d bad input line(s) (%s)", len(badLines), lineList(badLines))
	}
	if skipped > 0 {
		fmt.Fprintf(e.stderr, ", %d already done (skipped)", skipped)
	}
	fmt.Fprintln(e.stderr)
	if len(order) > 0 {
		b.summary(order, stats)
	}
	fmt.Fprintf(e.stderr, "chorus batch: wrote %d line(s) to %s\n", written, b.o.out)
	switch {
	case writeErr != nil:
		fmt.Fprintf(e.stderr, "chorus batch: %v; run again with --resume\n", writeErr)
		return 1
	case readErr != nil:
		fmt.Fprintf(e.stderr, "chorus batch: reading %s: %v; run again with --resume\n", b.o.in, readErr)
		return 1
	case interrupted:
		fmt.Fprintf(e.stderr, "chorus batch: %d item(s) in flight were not written; run again with --resume to finish\n", cancelled)
		return 130
	case failed > 0 || len(badLines) > 0:
		return 1
	}
	return 0
}

// lineList prints line numbers, the first few only.
func lineList(lines []int) string {
	slices.Sort(lines)
	var parts []string
	for i, l := range lines {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(lines)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("line %d", l))
	}
	return strings.Join(parts, ", ")
}

// summary prints the per-model table.
func (b *batchRun) summary(order []string, stats map[string]*modelStat) {
	aliases := b.st.rt.Aliases()
	w := len("model")
	for _, m := range order {
		w = max(w, len(m))
	}
	fmt.Fprintf(b.e.stderr, "  %-*s %9s %7s %10s %8s %6s %9s\n", w, "model", "requests", "failed", "tokens", "retries", "429s", "wall")
	for _, m := range order {
		s := stats[m]
		names := []string{m}
		if t, ok := aliases[m]; ok {
			names = t
		}
		a := b.st.attempts.of(names...)
		retries := max(a.attempts-int64(s.requests), 0)
		fmt.Fprintf(b.e.stderr, "  %-*s %9d %7d %10d %8d %6d %9s\n", w, m, s.requests, s.failed, s.tokens, retries, a.rateLimited,
			s.last.Sub(s.first).Round(time.Millisecond))
	}
}

// read parses the input, sending one job per line to be done. It returns
// how many lines were skipped as already done.
func (b *batchRun) read(ctx context.Context, in io.Reader, done map[string]bool, jobs chan<- *job) (int, error) {
	br := bufio.NewReaderSize(in, 1<<20)
	seen := map[string]int{}
	skipped := 0
	send := func(j *job) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			var l inputLine
			var j *job
			lerr := json.Unmarshal(raw, &l)
			switch id := l.CustomID; {
			case lerr != nil:
				j = &job{line: n, kind: jobBad, err: fmt.Errorf("not a valid batch input line: %v", lerr)}
			case id != "" && seen[id] > 0:
				j = &job{line: n, kind: jobBad, err: fmt.Errorf("custom_id %q repeats line %d", id, seen[id])}
			case id != "" && done[id]:
				seen[id] = n
				skipped++
				b.prog.skip()
				continue
			default:
				if id != "" {
					seen[id] = n
				}
				j = b.parse(n, &l)
			}
			if !send(j) {
				return skipped, nil
			}
		}
		if err == io.EOF {
			return skipped, nil
		}
		if err != nil {
			return skipped, err
		}
	}
}

// parse reads one input line into a job; a line at fault becomes a bad job
// that keeps its custom_id when it has one (its error is then written to
// the output under that id).
func (b *batchRun) parse(n int, l *inputLine) *job {
	j := &job{line: n, customID: l.CustomID}
	bad := func(err error) *job {
		j.kind, j.err = jobBad, err
		return j
	}
	switch {
	case l.CustomID == "":
		j.customID = ""
		return bad(errors.New("custom_id: is missing"))
	case l.Method != "POST":
		return bad(fmt.Errorf("method: want \"POST\", got %q", l.Method))
	case len(l.Body) == 0:
		return bad(errors.New("body: is missing"))
	}
	switch l.URL {
	case urlChat:
		req, err := chatFromOpenAI(l.Body)
		if err != nil {
			return bad(err)
		}
		j.kind, j.chat, j.model = jobChat, req, req.Model
	case urlEmbeddings:
		req, b64, err := embedFromOpenAI(l.Body)
		if err != nil {
			return bad(err)
		}
		j.kind, j.embed, j.model, j.b64 = jobEmbed, req, req.Model, b64
	default:
		return bad(fmt.Errorf("url: %q is not served (%s, %s)", l.URL, urlChat, urlEmbeddings))
	}
	if j.model == "" {
		m, err := b.fallbackModel(j.kind == jobEmbed)
		if err != nil {
			return bad(fmt.Errorf("body.model: is missing, and %w", err))
		}
		j.model = m
	}
	if j.chat != nil {
		j.chat.Model = j.model
	} else {
		j.embed.Model = j.model
	}
	return j
}

// fallbackModel is the model of a line that names none: the flag, else
// the default (see stack.defaultModel), announced once.
func (b *batchRun) fallbackModel(embed bool) (string, error) {
	if embed && b.o.embedModel != "" {
		return b.o.embedModel, nil
	}
	if !embed && b.o.model != "" {
		return b.o.model, nil
	}
	b.dmu.Lock()
	defer b.dmu.Unlock()
	if p, ok := b.dflt[embed]; ok {
		return p.model, p.err
	}
	m, why, err := b.st.defaultModel(embed)
	b.dflt[embed] = defaultPick{m, why, err}
	if err == nil {
		kind := "chat"
		if embed {
			kind = "embedding"
		}
		b.prog.logf("chorus batch: %s lines without a model use %s (%s)", kind, m, why)
	}
	return m, err
}

// do runs one job.
func (b *batchRun) do(ctx context.Context, j *job) (r *result) {
	r = &result{job: j, start: time.Now()}
	defer func() {
		if v := recover(); v != nil {
			r.err, r.failed, r.out = fmt.Errorf("internal error: %v", v), true, nil
			if j.customID != "" {
				r.out, _ = encodeLine(errorLine(j.customID, r.err))
			}
		}
		r.end = time.Now()
	}()
	var line outputLine
	switch j.kind {
	case jobBad:
		r.failed = true
		if j.customID == "" {
			return r
		}
		line = errorLine(j.customID, fmt.Errorf("input line %d: %w", j.line, j.err))
	case jobChat:
		res, err := b.chat(ctx, j.chat)
		if err != nil {
			return b.failure(ctx, r, err)
		}
		r.usage = res.Usage
		line = successLine(j.customID, res.Meta.RequestID, completionBody(res, j.model, time.Now()))
	case jobEmbed:
		res, err := b.embed(ctx, j.embed)
		if err != nil {
			return b.failure(ctx, r, err)
		}
		r.usage = res.Usage
		line = successLine(j.customID, res.Meta.RequestID, embeddingBody(res, j.model, j.b64))
	}
	out, err := encodeLine(line)
	if err != nil {
		return b.failure(ctx, r, err)
	}
	r.out = out
	return r
}

// failure records a failed call; a call cut short by cancellation is not
// a result (nothing is written, so --resume runs it again).
func (b *batchRun) failure(ctx context.Context, r *result, err error) *result {
	if ctx.Err() != nil {
		r.cancelled = true
		return r
	}
	r.failed, r.err = true, err
	r.out, _ = encodeLine(errorLine(r.job.customID, err))
	return r
}
