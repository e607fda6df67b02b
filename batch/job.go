package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/cache"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/telemetry"
)

// Runner is where a line runs: the local runtime (*runtime.Runtime), a
// cluster node (*cluster.Node), or anything else that answers chat and
// embedding requests.
type Runner interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	Embed(ctx context.Context, req *llm.EmbedRequest) (*llm.EmbedResult, error)
}

// Job is one batch job: every line of Input runs on Runner (or, with
// Native, on the providers' batch APIs) and its answer is appended to
// Output.
type Job struct {
	// Input is the OpenAI Batch input JSONL.
	Input io.Reader
	// InputName names the input in bad-line reports ("in.jsonl").
	InputName string
	// Output receives one line per custom_id (see OpenOutput).
	Output *Output
	// Runner runs the lines live. Required.
	Runner Runner
	// Concurrency is how many lines run at once at most (default 32).
	Concurrency int
	// DefaultModel picks the model of a line whose body names none
	// (embed: an embedding line). It is asked once per kind; a non-empty
	// why is announced in an EventDefaultModel. Nil: such a line is bad.
	DefaultModel func(embed bool) (model, why string, err error)
	// Resolve, when set, maps the model a line names to the name Runner
	// serves it by: runtime.Runtime.Resolve(model, "openai") serves the
	// bare OpenAI model names of a batch file as OpenAI's own tools write
	// it ("gpt-4o-mini") on provider openai. Its error makes the line bad.
	// The summary and the events name the model as the line did.
	Resolve func(model string) (string, error)
	// Observe, when set, receives the job's progress events. It is called
	// from the job's goroutines, one event at a time, and must not block.
	Observe func(Event)
	// Prices, when set, prices each answer (Result cost, Report totals).
	Prices *Prices
	// Native, when set, sends the chat lines it can to the providers'
	// batch APIs (see Native); the others run live on Runner.
	Native *Native
	// Telemetry, when set, is where the job's spans and metrics go (see
	// telemetry.go); nil: the global OpenTelemetry providers.
	Telemetry *telemetry.Telemetry
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventSkipped: a line whose custom_id is already in the output.
	EventSkipped EventKind = iota + 1
	// EventDone: a line finished (succeeded, failed, or bad) and its
	// output line, if any, was written.
	EventDone
	// EventBadLine: an input line is bad (Line, CustomID when it has one,
	// Err). An EventDone follows it.
	EventBadLine
	// EventDefaultModel: lines without a model use Model (Embed: the
	// embedding lines), for the reason Why.
	EventDefaultModel
	// EventInternal: a bug (a panic) cost an item; Err says what.
	EventInternal
	// EventRemote: a native batch was submitted, polled or refused
	// (Remote; Err when a poll or submit failed).
	EventRemote
	// EventNotRun: a native batch gave a line back without running it
	// (expired or cancelled; Err names the code). Nothing is written: a
	// resumed job runs it live.
	EventNotRun
)

// Event is one progress event of a job.
type Event struct {
	Kind     EventKind
	Line     int
	CustomID string
	Model    string
	Failed   bool
	Tokens   int
	// Cost is the item's cost when its model is priced; Saved is what the
	// batch discount saved on a native item.
	Cost  *Cost
	Saved *Cost
	Embed bool
	Why   string
	Err   error
	// Remote is the batch an EventRemote is about.
	Remote *RemoteStatus
	// Native reports an item answered by a provider's batch API.
	Native bool
	// Usage is a native item's usage and Served the provider/model that
	// answered it (an EventDone of a native item; zero otherwise), so that
	// an observer can charge it at its batch price.
	Usage  llm.Usage
	Served string
}

// BadLine is an input line the job could not run.
type BadLine struct {
	Line     int
	CustomID string // empty when the line has none (nothing is written)
	Err      error
}

// ModelSummary is one model's row of the job's summary.
type ModelSummary struct {
	// Model is the model as the lines named it (provider/model or alias).
	Model    string
	Requests int
	Failed   int
	Tokens   int64
	// Wall is from the first line's start to the last line's end.
	Wall time.Duration
	// Cost adds up the priced answers; Priced says how many were priced
	// (a model without a price has Priced 0 and shows "-").
	Cost   Cost
	Priced int
	// Native counts the lines answered by the provider's batch API;
	// Saved is what the batch discount saved on them (priced ones only).
	Native int
	Saved  Cost
	// NotRun counts lines a native batch expired or cancelled.
	NotRun int
}

// Report is what a job did.
type Report struct {
	Succeeded, Failed int
	// Skipped lines were already in the output (Resume).
	Skipped int
	// Cached counts the succeeded lines answered from the Runner's
	// response cache (at zero cost).
	Cached int
	// Cancelled items were in flight when the context ended: nothing was
	// written for them, so a resumed job runs them.
	Cancelled int
	Written   int
	BadLines  []BadLine
	// Models is the per-model summary, in the order models first appeared.
	Models []ModelSummary
	// NotRun are the lines native batches expired or cancelled: not
	// written, so a resumed job runs them live.
	NotRun []string
	// Unsubmitted counts the lines a Cancel run left alone.
	Unsubmitted int
	// Remote lists the native batches still running when the job
	// returned (interrupted): a resumed job picks them up.
	Remote []RemoteStatus
	// Interrupted reports that the context ended before the input did.
	Interrupted bool
	Elapsed     time.Duration
}

// InputError is a failure reading the job's input (not a bad line).
type InputError struct {
	Name string
	Err  error
}

func (e *InputError) Error() string { return "reading " + e.Name + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// CountLines counts the non-blank lines of r (the job's total, for
// progress).
func CountLines(r io.Reader) (int, error) {
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

// kind is what an input line asks for.
type kind uint8

const (
	kindBad kind = iota
	kindChat
	kindEmbed
)

// item is one input line.
type item struct {
	line     int
	customID string
	kind     kind
	model    string // as named: provider/model or an alias
	chat     *llm.ChatRequest
	embed    *llm.EmbedRequest
	b64      bool
	err      error      // kindBad: what is wrong with the line
	unserved error      // Job.Resolve's refusal of the line's model
	cache    cache.Mode // the line's "cache" field: its response cache mode
}

// result is one finished item.
type result struct {
	item      *item
	out       []byte // the output line; nil when nothing is written
	failed    bool
	cancelled bool
	cached    bool // answered from the Runner's response cache
	native    bool
	written   bool   // native: the line is already in the output
	notRun    string // native: CodeExpired or CodeCancelled
	internal  error  // a panic in do
	usage     llm.Usage
	served    string // native: the provider/model that answered
	cost      *Cost
	saved     *Cost
	err       error
	start     time.Time
	end       time.Time
}

type defaultPick struct {
	model, why string
	err        error
}

// run is one job running.
type run struct {
	j    Job
	emu  sync.Mutex // emit
	dmu  sync.Mutex
	dflt map[bool]defaultPick
	// jobSpan is the job's span, which each line's span links to.
	jobSpan trace.SpanContext
}

// emit hands ev to Observe, one event at a time: the reader, the
// collector and the native poller each emit.
func (r *run) emit(ev Event) {
	if r.j.Observe == nil {
		return
	}
	r.emu.Lock()
	defer r.emu.Unlock()
	r.j.Observe(ev)
}

// Run runs the job until its input is done or ctx ends. Every line of the
// input gets at most one output line; a line whose custom_id the output
// already holds is skipped. The report is returned even with an error; the
// error is an *InputError or an *OutputError (run again resuming).
func Run(ctx context.Context, j Job) (*Report, error) {
	switch {
	case j.Input == nil:
		return nil, errors.New("batch: Job.Input is nil")
	case j.Output == nil:
		return nil, errors.New("batch: Job.Output is nil")
	case j.Runner == nil:
		return nil, errors.New("batch: Job.Runner is nil")
	}
	if j.Concurrency < 1 {
		j.Concurrency = 32
	}
	if j.InputName == "" {
		j.InputName = "input"
	}
	if j.Native == nil && j.Output.mode == Resume {
		// Lines held by remote batches must not also run live.
		jn, err := openJournalReadOnly(JournalPath(j.Output.Path()))
		if err != nil {
			return nil, err
		}
		if p := jn.pending(); len(p) > 0 {
			return nil, &PendingError{Path: jn.path, Batches: len(p)}
		}
	}
	j.Telemetry = j.Telemetry.OrGlobal()
	r := &run{j: j, dflt: map[bool]defaultPick{}}
	ctx, span := r.startJob(ctx)
	rep, err := r.run(ctx)
	endJob(span, rep, err)
	return rep, err
}

func (r *run) run(ctx context.Context) (*Report, error) {
	start := time.Now()
	var nat *native
	if r.j.Native != nil {
		var err error
		if nat, err = r.openNative(); err != nil {
			return nil, err
		}
		defer nat.j.close()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan *item)
	var readErr, nativeErr error
	readDone := make(chan struct{})
	var skipped int
	go func() {
		defer close(readDone)
		defer close(items)
		skipped, readErr = r.read(ctx, items, nat)
	}()
	live := pipeline.Map(ctx, items, func(ctx context.Context, it *item) (*result, llm.Usage, error) {
		res := r.do(ctx, it)
		return res, res.usage, nil
	}, pipeline.BatchOptions{Concurrency: r.j.Concurrency})
	results := make(chan *result)
	var feeders sync.WaitGroup
	feeders.Add(1)
	go func() {
		defer feeders.Done()
		for it := range live {
			res := it.Value
			if it.Err != nil || res == nil {
				res = &result{internal: fmt.Errorf("internal error: %v", it.Err)}
			}
			results <- res
		}
	}()
	if nat != nil {
		feeders.Add(1)
		go func() {
			defer feeders.Done()
			<-readDone
			if readErr == nil && ctx.Err() == nil {
				nativeErr = nat.run(ctx, results)
			}
		}()
	}
	go func() {
		feeders.Wait()
		close(results)
	}()
	rep, writeErr := r.collect(results, cancel)
	<-readDone
	rep.Skipped = skipped
	rep.Interrupted = ctx.Err() != nil && writeErr == nil
	rep.Elapsed = time.Since(start)
	if nat != nil {
		rep.Unsubmitted = nat.skipped
		for _, b := range nat.j.pending() {
			rep.Remote = append(rep.Remote, RemoteStatus{Provider: b.provider, BatchID: b.batchID, Total: len(b.ids), Elapsed: time.Since(b.at)})
		}
	}
	switch {
	case writeErr != nil:
		return rep, writeErr
	case readErr != nil:
		return rep, &InputError{Name: r.j.InputName, Err: readErr}
	case nativeErr != nil:
		return rep, nativeErr
	}
	return rep, nil
}

// collect writes the results as they come and adds them up.
func (r *run) collect(results <-chan *result, cancel context.CancelFunc) (*Report, error) {
	rep := &Report{}
	stats := map[string]*modelStat{}
	var order []string
	var writeErr error
	for res := range results {
		if res.internal != nil { // a panic in do: a bug, reported as such
			rep.Failed++
			r.emit(Event{Kind: EventInternal, Failed: true, Err: res.internal})
			continue
		}
		if res.cancelled {
			rep.Cancelled++
			continue
		}
		if res.written {
			rep.Written++
		} else if res.out != nil && writeErr == nil {
			if writeErr = r.j.Output.write(res.item.customID, res.out); writeErr != nil {
				cancel()
			} else {
				rep.Written++
			}
		}
		r.account(rep, stats, &order, res)
	}
	for _, m := range order {
		rep.Models = append(rep.Models, stats[m].summary(m))
	}
	return rep, writeErr
}

// modelStat adds up one model's results.
type modelStat struct {
	ModelSummary
	first, last time.Time
}

func (s *modelStat) summary(model string) ModelSummary {
	out := s.ModelSummary
	out.Model = model
	out.Wall = s.last.Sub(s.first)
	return out
}

// account counts one result in the report and emits its events.
func (r *run) account(rep *Report, stats map[string]*modelStat, order *[]string, res *result) {
	it := res.item
	tokens := res.usage.TotalTokens()
	if it.kind == kindBad {
		rep.BadLines = append(rep.BadLines, BadLine{Line: it.line, CustomID: it.customID, Err: it.err})
		r.emit(Event{Kind: EventBadLine, Line: it.line, CustomID: it.customID, Failed: true, Err: it.err})
		r.emit(Event{Kind: EventDone, Line: it.line, CustomID: it.customID, Failed: true})
		return
	}
	ms := stats[it.model]
	if ms == nil {
		ms = &modelStat{first: res.start}
		stats[it.model] = ms
		*order = append(*order, it.model)
	}
	if res.notRun != "" {
		ms.NotRun++
		rep.NotRun = append(rep.NotRun, it.customID)
		r.emit(Event{Kind: EventNotRun, Line: it.line, CustomID: it.customID, Model: it.model, Native: true, Err: res.err})
		return
	}
	ms.Requests++
	ms.Tokens += int64(tokens)
	if res.native {
		ms.Native++
	}
	if res.saved != nil {
		ms.Saved = ms.Saved.Add(*res.saved)
	}
	if res.cost != nil {
		ms.Cost = ms.Cost.Add(*res.cost)
		ms.Priced++
	}
	if res.start.Before(ms.first) {
		ms.first = res.start
	}
	if res.end.After(ms.last) {
		ms.last = res.end
	}
	if res.failed {
		ms.Failed++
		rep.Failed++
	} else {
		rep.Succeeded++
	}
	if res.cached {
		rep.Cached++
	}
	ev := Event{Kind: EventDone, Line: it.line, CustomID: it.customID, Model: it.model, Failed: res.failed, Tokens: tokens, Cost: res.cost, Saved: res.saved, Err: res.err, Native: res.native}
	if res.native {
		ev.Usage, ev.Served = res.usage, res.served
	}
	r.emit(ev)
}

// read parses the input, sending one item per line to be done. It returns
// how many lines were skipped as already done.
func (r *run) read(ctx context.Context, items chan<- *item, nat *native) (int, error) {
	br := bufio.NewReaderSize(r.j.Input, 1<<20)
	seen := map[string]int{}
	skipped := 0
	send := func(it *item) bool {
		select {
		case items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			it, skip := r.parseLine(n, raw, seen)
			switch {
			case skip:
				skipped++
				r.emit(Event{Kind: EventSkipped, Line: n, CustomID: it.customID})
			case nat != nil && nat.take(it):
			case !send(it):
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

// parseLine reads line n; skip reports a custom_id already in the output.
// seen maps the custom_ids met so far to their line.
func (r *run) parseLine(n int, raw []byte, seen map[string]int) (it *item, skip bool) {
	var l inputLine
	lerr := json.Unmarshal(raw, &l)
	switch id := l.CustomID; {
	case lerr != nil:
		return &item{line: n, kind: kindBad, err: fmt.Errorf("not a valid batch input line: %v", lerr)}, false
	case id != "" && seen[id] > 0:
		return &item{line: n, kind: kindBad, err: fmt.Errorf("custom_id %q repeats line %d", id, seen[id])}, false
	case id != "" && r.j.Output.Done(id):
		seen[id] = n
		return &item{line: n, customID: id}, true
	default:
		if id != "" {
			seen[id] = n
		}
		return r.parse(n, &l), false
	}
}

// parse reads one input line into an item; a line at fault becomes a bad
// item that keeps its custom_id when it has one (its error is then written
// to the output under that id).
func (r *run) parse(n int, l *inputLine) *item {
	it := &item{line: n, customID: l.CustomID}
	bad := func(err error) *item {
		it.kind, it.err = kindBad, err
		return it
	}
	switch {
	case l.CustomID == "":
		it.customID = ""
		return bad(errors.New("custom_id: is missing"))
	case l.Method != "POST":
		return bad(fmt.Errorf("method: want \"POST\", got %q", l.Method))
	case len(l.Body) == 0:
		return bad(errors.New("body: is missing"))
	}
	if l.Cache != "" {
		m, err := cache.ParseMode("cache", l.Cache)
		if err != nil {
			return bad(err)
		}
		it.cache = m
	}
	switch l.URL {
	case URLChat:
		req, err := chatFromOpenAI(l.Body)
		if err != nil {
			return bad(err)
		}
		it.kind, it.chat, it.model = kindChat, req, req.Model
	case URLEmbeddings:
		req, b64, err := embedFromOpenAI(l.Body)
		if err != nil {
			return bad(err)
		}
		it.kind, it.embed, it.model, it.b64 = kindEmbed, req, req.Model, b64
	default:
		return bad(fmt.Errorf("url: %q is not served (%s, %s)", l.URL, URLChat, URLEmbeddings))
	}
	if it.model == "" {
		m, err := r.fallbackModel(it.kind == kindEmbed)
		if err != nil {
			return bad(fmt.Errorf("body.model: is missing, and %w", err))
		}
		it.model = m
	}
	served := it.model
	if r.j.Resolve != nil {
		m, err := r.j.Resolve(it.model)
		if err != nil {
			// Failed as the runner fails a model it does not serve: an
			// answered line with the error, not a bad input line.
			it.unserved = &llm.ConfigError{Field: "model", Msg: err.Error()}
		} else {
			served = m
		}
	}
	if it.chat != nil {
		it.chat.Model = served
	} else {
		it.embed.Model = served
	}
	return it
}

// errNoDefault is the fallback error when Job.DefaultModel is nil.
var errNoDefault = errors.New("the job has no default model")

// fallbackModel is the model of a line that names none, asked once per
// kind and announced when the job says why.
func (r *run) fallbackModel(embed bool) (string, error) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	if p, ok := r.dflt[embed]; ok {
		return p.model, p.err
	}
	p := defaultPick{err: errNoDefault}
	if r.j.DefaultModel != nil {
		p.model, p.why, p.err = r.j.DefaultModel(embed)
	}
	r.dflt[embed] = p
	if p.err == nil && p.why != "" {
		r.emit(Event{Kind: EventDefaultModel, Model: p.model, Embed: embed, Why: p.why})
	}
	return p.model, p.err
}

// do runs one item live.
func (r *run) do(ctx context.Context, it *item) (res *result) {
	ctx, endLine := r.startLine(ctx, it)
	defer func() { endLine(res) }() // after the recovery below

	// The Runner learns which line it serves (LineOf, lineid.go).
	ctx = context.WithValue(ctx, lineKey{}, it.customID)
	res = &result{item: it, start: time.Now()}
	defer func() {
		if v := recover(); v != nil {
			res.err, res.failed, res.out = fmt.Errorf("internal error: %v", v), true, nil
			if it.customID != "" {
				res.out, _ = encodeLine(errorLine(it.customID, res.err))
			}
		}
		res.end = time.Now()
	}()
	var line outputLine
	switch it.kind {
	case kindBad:
		res.failed = true
		if it.customID == "" {
			return res
		}
		line = errorLine(it.customID, fmt.Errorf("input line %d: %w", it.line, it.err))
	case kindChat, kindEmbed:
		if it.unserved != nil {
			return failure(ctx, res, it.unserved)
		}
	}
	switch it.kind {
	case kindChat:
		var cr cache.Report // a Runner with a response cache says whether it answered
		cctx := cache.WithReport(ctx, &cr)
		if it.cache != "" {
			cctx = cache.WithMode(cctx, it.cache)
		}
		out, err := r.j.Runner.Chat(cctx, it.chat)
		if err != nil {
			return failure(ctx, res, err)
		}
		res.usage = out.Usage
		res.cost = r.j.Prices.costOf(servedModel(out.Meta, out.Model, it.model), out.Usage, false)
		if cr.Outcome == cache.Hit && res.cost != nil {
			res.cost = &Cost{} // a cached answer costs nothing
		}
		body := completionBody(out, it.model, time.Now())
		body.Usage.Cost = res.cost.usd()
		line = successLine(it.customID, out.Meta.RequestID, body)
		if cr.Outcome == cache.Hit {
			line.Cache, res.cached = "hit", true
		}
	case kindEmbed:
		out, err := r.j.Runner.Embed(ctx, it.embed)
		if err != nil {
			return failure(ctx, res, err)
		}
		res.usage = out.Usage
		res.cost = r.j.Prices.costOf(servedModel(out.Meta, out.Model, it.model), out.Usage, false)
		body := embeddingBody(out, it.model, it.b64)
		body.Usage.Cost = res.cost.usd()
		line = successLine(it.customID, out.Meta.RequestID, body)
	}
	out, err := encodeLine(line)
	if err != nil {
		return failure(ctx, res, err)
	}
	res.out = out
	return res
}

// failure records a failed call; a call cut short by cancellation is not
// a result (nothing is written, so a resumed job runs it again).
func failure(ctx context.Context, res *result, err error) *result {
	if ctx.Err() != nil {
		res.cancelled = true
		return res
	}
	res.failed, res.err = true, err
	res.out, _ = encodeLine(errorLine(res.item.customID, err))
	return res
}
