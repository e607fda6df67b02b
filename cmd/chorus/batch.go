package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/providers"
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
      --config FILE       chorus.yaml: aliases, providers, limits, defaults, sim,
                          prices (each result's cost, the summary's total)
      --native            send chat lines (and OpenAI embedding lines) to
                          the providers' own batch APIs
                          (OpenAI, Anthropic, Gemini: half price, results
                          within 24h); other lines run live. The remote
                          batch ids are kept in OUT.jsonl.batches: a killed
                          or interrupted run goes on with --resume
      --cancel            cancel the remote batches of an interrupted
                          --native run, write what they finished, run
                          nothing else (implies --native --resume)
      --poll D            --native: time between two polls (default 30s)
      --cluster NAME      spread the lines over the members of a Chorus
                          cluster (chorus node) instead of calling from here;
                          this process joins as a client and alone writes
                          the output, so resume works as without a cluster
      --peers LIST        the cluster's member addresses, comma-separated
      --bind HOST:PORT    this client's actor address (default: a free
                          loopback port)

Exit status: 0 all succeeded, 1 some item failed or an input line was bad
(or a native batch gave lines back unrun), 2 usage or setup error, 130
interrupted (run again with --resume).
`

// batchOpts are the flags of chorus batch.
type batchOpts struct {
	in, out, model, embedModel, config string
	cluster, peers, bind               string
	concurrency                        int
	resume, overwrite                  bool
	native, cancel                     bool
	poll                               time.Duration
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
	fs.BoolVar(&o.native, "native", false, "")
	fs.BoolVar(&o.cancel, "cancel", false, "")
	fs.DurationVar(&o.poll, "poll", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.cancel {
		o.native, o.resume = true, true
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
	case o.resume && o.overwrite && o.cancel:
		return nil, errors.New("--cancel and --overwrite exclude each other")
	case o.resume && o.overwrite:
		return nil, errors.New("--resume and --overwrite exclude each other")
	case o.poll <= 0:
		return nil, fmt.Errorf("--poll must be positive, got %v", o.poll)
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
		if total, err = batch.CountLines(f); err != nil {
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
	mode := batch.Create
	switch {
	case o.resume:
		mode = batch.Resume
	case o.overwrite:
		mode = batch.Overwrite
	}
	out, err := batch.OpenOutput(o.out, mode)
	if oe := (*batch.OutputError)(nil); errors.As(err, &oe) && oe.Path == batch.JournalPath(o.out) && errors.Is(err, batch.ErrOutputExists) {
		return fail("%s %v of an interrupted --native run: pass --resume to finish it, --cancel to cancel its batches, or --overwrite to start again",
			oe.Path, batch.ErrOutputExists)
	}
	if errors.Is(err, batch.ErrOutputExists) {
		return fail("-o %s %v: pass --resume to finish it, or --overwrite to start again", o.out, batch.ErrOutputExists)
	}
	if err != nil {
		return fail("-o %v", err)
	}
	if n := out.Cut(); n > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: %s: cut an unterminated last line (%d bytes) left by an interrupted run\n", o.out, n)
	}
	if n := out.DoneCount(); o.resume && n > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: resuming: %d custom_id(s) already in %s are skipped\n", n, o.out)
	}
	var runner batch.Runner = st.rt
	if o.cluster != "" {
		n, err := joinCluster(ctx, o)
		if err != nil {
			_ = out.Close()
			return fail("--cluster %s: %v", o.cluster, err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = n.Close(cctx)
		}()
		runner = n
		fmt.Fprintf(e.stderr, "chorus batch: lines go to cluster %q (%d members)\n", o.cluster, len(n.Members()))
	}
	var native *batch.Native
	if o.native {
		native = &batch.Native{Clients: nativeClients(e), Poll: o.poll, Cancel: o.cancel}
		if len(native.Clients) == 0 && !o.cancel {
			fmt.Fprintln(e.stderr, "chorus batch: --native: no OpenAI, Anthropic or Gemini key is set; every line runs live")
		}
	}
	var prices *batch.Prices
	if len(st.cfg.prices) > 0 {
		prices = &batch.Prices{Models: st.cfg.prices}
	}
	prog := newProgress(e.stderr, e.stderrTTY, e.width, total)
	job := batch.Job{
		Native: native, Prices: prices,
		Input: in, InputName: o.in, Output: out, Runner: runner, Concurrency: o.concurrency,
		DefaultModel: func(embed bool) (string, string, error) {
			if embed && o.embedModel != "" {
				return o.embedModel, "", nil
			}
			if !embed && o.model != "" {
				return o.model, "", nil
			}
			return st.defaultModel(embed)
		},
		// A batch file in OpenAI's format names OpenAI's models bare.
		Resolve: func(model string) (string, error) { return st.rt.Resolve(model, "openai") },
		Observe: batchObserver(o, prog),
	}
	rep, runErr := batch.Run(ctx, job)
	prog.finish()
	code := reportBatch(e, o, st, rep, runErr)
	if err := out.Close(); err != nil {
		fmt.Fprintf(e.stderr, "chorus batch: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// batchObserver turns the job's events into the progress display and the
// log lines above it (the first 20 bad lines, the default models).
func batchObserver(o *batchOpts, prog *progress) func(batch.Event) {
	bad, notRun := 0, 0
	remote := map[string]string{} // batch id -> what the last poll said
	var saved batch.Cost          // what the batch discount saved so far
	priced := false
	return func(ev batch.Event) {
		switch ev.Kind {
		case batch.EventSkipped:
			prog.skip()
		case batch.EventDone:
			prog.item(ev.Failed, ev.Tokens)
			if ev.Saved != nil {
				saved, priced = saved.Add(*ev.Saved), true
			}
		case batch.EventBadLine:
			if bad++; bad <= 20 {
				prog.logf("chorus batch: %s:%d: %v", o.in, ev.Line, ev.Err)
			}
		case batch.EventDefaultModel:
			kind := "chat"
			if ev.Embed {
				kind = "embedding"
			}
			prog.logf("chorus batch: %s lines without a model use %s (%s)", kind, ev.Model, ev.Why)
		case batch.EventInternal:
			prog.item(true, 0)
			prog.logf("chorus batch: internal error: %v", ev.Err)
		case batch.EventNotRun:
			prog.item(true, 0)
			if notRun++; notRun <= 20 {
				prog.logf("chorus batch: %s: not run: %v", ev.CustomID, ev.Err)
			}
		case batch.EventRemote:
			r := ev.Remote
			seen := fmt.Sprintf("%s %d %d", r.State, r.Succeeded, r.Failed)
			if ev.Err == nil && remote[r.BatchID] == seen {
				return // unchanged since the last poll
			}
			remote[r.BatchID] = seen
			switch {
			case ev.Err != nil && r.BatchID == "":
				prog.logf("chorus batch: %s refused a batch of %d line(s): %v", r.Provider, r.Total, ev.Err)
			case ev.Err != nil:
				prog.logf("chorus batch: %s batch %s: %s: %v (polling again)", r.Provider, r.BatchID, r.State, ev.Err)
			case r.State == "submitted":
				prog.logf("chorus batch: submitted %d line(s) to %s as batch %s (ids in %s)", r.Total, r.Provider, r.BatchID, batch.JournalPath(o.out))
			default:
				note := ""
				if priced {
					note = fmt.Sprintf(", $%.4f saved so far", saved.USD)
				}
				prog.logf("chorus batch: %s batch %s: %s, %d/%d done, %d failed, %s elapsed%s", r.Provider, r.BatchID, r.State,
					r.Succeeded+r.Failed, r.Total, r.Failed, r.Elapsed.Round(time.Second), note)
			}
		}
	}
}

// reportBatch prints the end of a batch (counts, the per-model summary,
// what to do next) and returns the exit status.
func reportBatch(e env, o *batchOpts, st *stack, rep *batch.Report, runErr error) int {
	if rep == nil {
		if pe := (*batch.PendingError)(nil); errors.As(runErr, &pe) {
			fmt.Fprintf(e.stderr, "chorus batch: %s records %d remote batch(es) of an interrupted --native run: add --native to wait for them, or use --cancel\n", pe.Path, pe.Batches)
			return 2
		}
		fmt.Fprintf(e.stderr, "chorus batch: %v\n", runErr)
		return 2
	}
	fmt.Fprintf(e.stderr, "chorus batch: %s in %s: %d succeeded, %d failed",
		map[bool]string{true: "interrupted", false: "finished"}[rep.Interrupted], rep.Elapsed.Round(time.Millisecond), rep.Succeeded, rep.Failed)
	if len(rep.BadLines) > 0 {
		lines := make([]int, len(rep.BadLines))
		for i, b := range rep.BadLines {
			lines[i] = b.Line
		}
		fmt.Fprintf(e.stderr, ", %d bad input line(s) (%s)", len(rep.BadLines), lineList(lines))
	}
	if rep.Skipped > 0 {
		fmt.Fprintf(e.stderr, ", %d already done (skipped)", rep.Skipped)
	}
	if rep.Cached > 0 {
		fmt.Fprintf(e.stderr, ", %d from the cache", rep.Cached)
	}
	fmt.Fprintln(e.stderr)
	if len(rep.Models) > 0 {
		batchSummary(e, st, rep.Models, len(st.cfg.prices) > 0 || o.native, len(st.cfg.prices) > 0)
	}
	fmt.Fprintf(e.stderr, "chorus batch: wrote %d line(s) to %s\n", rep.Written, o.out)
	if len(rep.NotRun) > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: %d line(s) expired or were cancelled in their native batch and were not written; run again with --resume to run them live\n", len(rep.NotRun))
	}
	if rep.Unsubmitted > 0 {
		fmt.Fprintf(e.stderr, "chorus batch: --cancel: %d line(s) not yet submitted were not run\n", rep.Unsubmitted)
	}
	if len(rep.Remote) > 0 {
		for _, b := range rep.Remote {
			id := b.BatchID
			if id == "" {
				id = "(submit unconfirmed)"
			}
			fmt.Fprintf(e.stderr, "chorus batch: %s batch %s (%d lines) keeps running remotely\n", b.Provider, id, b.Total)
		}
		fmt.Fprintf(e.stderr, "chorus batch: run again with --resume to wait for it and write its results, or with --cancel to cancel it\n")
	}
	var ie *batch.InputError
	switch {
	case errors.As(runErr, &ie):
		fmt.Fprintf(e.stderr, "chorus batch: reading %s: %v; run again with --resume\n", o.in, ie.Err)
		return 1
	case runErr != nil:
		fmt.Fprintf(e.stderr, "chorus batch: %v; run again with --resume\n", runErr)
		return 1
	case rep.Interrupted:
		fmt.Fprintf(e.stderr, "chorus batch: %d item(s) in flight were not written; run again with --resume to finish\n", rep.Cancelled)
		return 130
	case rep.Failed > 0 || len(rep.BadLines) > 0 || len(rep.NotRun) > 0:
		return 1
	}
	return 0
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

// batchSummary prints the per-model table: the job's counts plus the
// retries and 429s the attempt observer saw; with prices or --native, the
// lines answered natively, the cost ("-" for a model without a price,
// never a guess) and what the batch discount saved.
func batchSummary(e env, st *stack, models []batch.ModelSummary, costs, priced bool) {
	aliases := st.rt.Aliases()
	w := len("model")
	for _, m := range models {
		w = max(w, len(m.Model))
	}
	extra := func(s batch.ModelSummary) string {
		if !costs {
			return ""
		}
		cost, saved := "-", "-"
		if s.Priced > 0 {
			cost, saved = fmt.Sprintf("$%.4f", s.Cost.USD), fmt.Sprintf("$%.4f", s.Saved.USD)
		}
		return fmt.Sprintf(" %7d %10s %10s", s.Native, cost, saved)
	}
	head := ""
	if costs {
		head = fmt.Sprintf(" %7s %10s %10s", "native", "cost", "saved")
	}
	fmt.Fprintf(e.stderr, "  %-*s %9s %7s %10s %8s %6s %9s%s\n", w, "model", "requests", "failed", "tokens", "retries", "429s", "wall", head)
	var total batch.Cost
	unpriced := 0
	for _, s := range models {
		names := []string{s.Model}
		if t, ok := aliases[s.Model]; ok {
			names = t
		}
		a := st.attempts.of(names...)
		retries := max(a.attempts-int64(s.Requests-s.Native), 0)
		fmt.Fprintf(e.stderr, "  %-*s %9d %7d %10d %8d %6d %9s%s\n", w, s.Model, s.Requests, s.Failed, s.Tokens, retries, a.rateLimited,
			s.Wall.Round(time.Millisecond), extra(s))
		total = total.Add(s.Cost)
		if s.Priced == 0 {
			unpriced++
		}
	}
	if priced {
		note := ""
		if unpriced > 0 {
			note = fmt.Sprintf(" (%d model(s) without a price in prices: show -)", unpriced)
		}
		fmt.Fprintf(e.stderr, "chorus batch: cost $%.4f%s\n", total.USD, note)
	}
}

// nativeClients are the credentials --native submits with: the first key
// in the environment of openai, anthropic and gemini (an OpenAI-format
// provider such as deepseek has no batch API: its lines run live).
func nativeClients(e env) map[string]*providers.Client {
	out := map[string]*providers.Client{}
	for _, cfg := range providers.FromEnvFunc(e.getenv) {
		if cfg.APIKey == "" || out[cfg.ID] != nil {
			continue
		}
		switch cfg.ID { // the providers whose batch API Chorus speaks
		case "openai", "anthropic", "gemini":
		default:
			continue
		}
		if c, err := providers.New(cfg); err == nil {
			out[cfg.ID] = c
		}
	}
	return out
}
