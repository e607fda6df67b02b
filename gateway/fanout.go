package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/openai"
	"github.com/chorusrt/chorus/runtime"
)

// A fan-out alias (Options.FanOut) sends one chat request to each of its
// models at once and answers in the OpenAI Chat Completions format with a
// choice per model, as OpenAI answers n > 1: choice i is model i's answer.
// Each model is called through the runtime (its own pacing, retries and
// fallbacks). A model that fails before its answer began has no choice,
// and x-chorus-fanout-failed names it ("i=status,..."): a header, or, for
// a stream whose headers had gone, a trailer. When every model fails the
// answer is the first one's error. Streamed, the choices' chunks
// interleave as they arrive; a model that fails after its choice began
// ends the whole stream with the in-band error (never a choice silently
// cut short). The usage is the sum of the models'.

// hdrFanOutFailed names the fan-out's models that failed: "i=status,...".
const hdrFanOutFailed = "X-Chorus-Fanout-Failed"

// fanOutAllowed reports whether a key may call a fan-out alias: named in
// its models, or every one of its models allowed.
func fanOutAllowed(ks *keyState, name string, targets []string) bool {
	if ks == nil || ks.allows(name) {
		return true
	}
	for _, t := range targets {
		if !ks.allows(t) {
			return false
		}
	}
	return true
}

// fanOutFailure records a failed model for hdrFanOutFailed.
func fanOutFailure(failed []string, i int, e *Error) []string {
	return append(failed, strconv.Itoa(i)+"="+strconv.Itoa(e.Status))
}

// serveFanOut answers a chat completion request for fan-out alias name.
func (h *Handler) serveFanOut(w http.ResponseWriter, r *http.Request, ks *keyState, sc *openai.ServerChat, name string, targets []string) {
	const f = formatOpenAI
	noteModel(w, name, sc.Stream) // requestlog.go
	if ks != nil && !fanOutAllowed(ks, name, targets) {
		h.fail(w, f, &Error{Status: http.StatusForbidden, Message: "gateway key " + strconv.Quote(ks.key.Name) + " may not call model " + strconv.Quote(name)})
		return
	}
	cctx, ce := h.cacheContext(r.Context(), r, ks) // cache.go: the key's namespace, the client's mode
	if ce != nil {
		h.fail(w, f, ce)
		return
	}
	r = r.WithContext(cctx)
	var adm admission
	if ks != nil {
		a, v, e := ks.admit(h.opts.Now(), h.estimateFanOut(ks, targets, r.ContentLength, sc.Chat.MaxTokens))
		setRateLimitHeaders(w.Header(), v)
		if e != nil {
			h.fail(w, f, e)
			return
		}
		adm = a
	}
	created := h.opts.Now().Unix()
	reqs := make([]*llm.ChatRequest, len(targets))
	reps := make([]*runtime.CallReport, len(targets))
	lcs := make([]logCall, len(targets)) // a record per model's answer (requestlog.go)
	for i, t := range targets {
		req := *sc.Chat
		req.Model = t
		reqs[i], reps[i] = &req, new(runtime.CallReport)
		lcs[i] = h.logStart(w, r, ks, f, name, sc.Stream)
	}
	var usage llm.Usage
	defer func() {
		adm.done(usage, reps...)
	}()
	if !sc.Stream {
		results := make([]*llm.ChatResult, len(targets))
		errs := make([]error, len(targets))
		var wg sync.WaitGroup
		for i := range targets {
			wg.Go(func() {
				results[i], errs[i] = h.rt.Chat(runtime.WithCallReport(r.Context(), reps[i]), reqs[i])
			})
		}
		wg.Wait()
		for i := range targets {
			lcs[i].endText(reps[i], resUsage(results[i]), errs[i], results[i])
		}
		var failed []string
		var first error
		for i, err := range errs {
			if err != nil {
				failed = fanOutFailure(failed, i, errorFor(err))
				if first == nil {
					first = err
				}
				continue
			}
			usage = usage.Add(charged(reps[i], results[i].Usage)) // cache.go
		}
		if len(failed) > 0 {
			w.Header().Set(hdrFanOutFailed, strings.Join(failed, ","))
		}
		if len(failed) == len(targets) {
			h.fail(w, f, errorFor(first))
			return
		}
		b, err := openai.EncodeServerChatChoices(results, name, created)
		if err != nil {
			h.fail(w, f, errorFor(err))
			return
		}
		h.writeJSON(w, b)
		return
	}
	usage = h.fanOutStream(w, r, sc, name, created, reqs, reps, lcs)
}

// fanItem is one model's event, or (done) the end of its stream.
type fanItem struct {
	i    int
	ev   llm.Event
	done bool
}

// fanOutStream streams the fan-out's models as the choices of one answer
// and returns the usage it charges to the key: that of those that
// completed, but for the ones the cache answered (cache.go). Each model's
// record (lcs) ends with its stream.
func (h *Handler) fanOutStream(w http.ResponseWriter, r *http.Request, sc *openai.ServerChat, name string, created int64, reqs []*llm.ChatRequest, reps []*runtime.CallReport, lcs []logCall) llm.Usage {
	const f = formatOpenAI
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	var streams []*llm.Stream
	logged := make([]bool, len(reqs))
	defer func() {
		cancel()
		wg.Wait() // every reader has stopped, its stream closed
		for i, s := range streams {
			if s != nil && !logged[i] { // cut short: the client left, or another model's error ended the answer
				res, err := s.Result()
				lcs[i].endText(reps[i], resUsage(res), err, res)
			}
		}
	}()
	id := "chatcmpl-chorus-" + strconv.FormatInt(h.opts.Now().UnixNano(), 36)
	streams = make([]*llm.Stream, len(reqs))
	encs := make([]*openai.ServerStream, len(reqs))
	var failed []string
	var first error
	for i, req := range reqs {
		s, err := h.rt.Stream(runtime.WithCallReport(ctx, reps[i]), req)
		if err != nil {
			lcs[i].end(reps[i], llm.Usage{}, err)
			failed = fanOutFailure(failed, i, errorFor(err))
			if first == nil {
				first = err
			}
			continue
		}
		streams[i] = s
		encs[i] = openai.NewServerStream(id, name, created, sc.IncludeUsage)
		encs[i].SetChoice(i)
	}
	if len(failed) == len(reqs) {
		w.Header().Set(hdrFanOutFailed, strings.Join(failed, ","))
		h.fail(w, f, errorFor(first))
		return llm.Usage{}
	}
	items := make(chan fanItem, h.opts.FlushEvents)
	live := 0
	for i, s := range streams {
		if s == nil {
			continue
		}
		live++
		wg.Go(func() {
			defer s.Close()
			for ev := range s.Events() {
				select {
				case items <- fanItem{i: i, ev: ev}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case items <- fanItem{i: i, done: true}:
			case <-ctx.Done():
			}
		})
	}
	var usage, charge llm.Usage // the answer's; what the key is charged
	started := false
	begun := make([]bool, len(reqs)) // a choice has had a chunk
	sentFailed := len(failed)        // failures the headers named
	var buf []byte
	rc := http.NewResponseController(w)
	write := func() bool {
		if len(buf) == 0 {
			return true
		}
		_, err := w.Write(buf)
		if err == nil {
			err = rc.Flush()
		}
		buf = buf[:0]
		return err == nil
	}
	for live > 0 {
		var it fanItem
		select {
		case it = <-items:
		case <-ctx.Done():
			return charge // the client left
		}
		if it.done {
			live--
			res, err := streams[it.i].Result()
			lcs[it.i].endText(reps[it.i], resUsage(res), err, res)
			logged[it.i] = true
			switch {
			case err != nil && !begun[it.i]: // the model's choice never began: it has none
				failed = fanOutFailure(failed, it.i, errorFor(err))
				if first == nil {
					first = err
				}
				if live == 0 && len(failed) == len(reqs) {
					w.Header().Set(hdrFanOutFailed, strings.Join(failed, ","))
					h.fail(w, f, errorFor(first))
					return charge
				}
				continue
			case err != nil:
				buf = encs[it.i].Error(buf, errorFor(err).Status, errorFor(err).Message)
				write()
				return charge
			}
			var u llm.Usage
			if !started {
				h.startFanOutStream(w, failed)
				started, sentFailed = true, len(failed)
			}
			buf, u = encs[it.i].EndChoice(buf, res)
			usage = usage.Add(u)
			charge = charge.Add(charged(reps[it.i], u))
		} else {
			if !started {
				h.startFanOutStream(w, failed)
				started, sentFailed = true, len(failed)
			}
			begun[it.i] = true
			lcs[it.i].first()
			buf = encs[it.i].Event(buf, &it.ev)
		}
		if len(items) == 0 || len(buf) >= 64<<10 {
			if !write() {
				return charge
			}
		}
	}
	if !started { // every model ended without an event or an error
		h.startFanOutStream(w, failed)
		sentFailed = len(failed)
	}
	if len(failed) > sentFailed { // models that failed once the headers had gone
		w.Header().Set(http.TrailerPrefix+hdrFanOutFailed, strings.Join(failed, ","))
	}
	for _, e := range encs {
		if e != nil {
			buf = e.Close(buf, usage)
			break
		}
	}
	write()
	return charge
}

// startFanOutStream sends a fan-out stream's headers.
func (h *Handler) startFanOutStream(w http.ResponseWriter, failed []string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	if len(failed) > 0 {
		hd.Set(hdrFanOutFailed, strings.Join(failed, ","))
	}
	w.WriteHeader(http.StatusOK)
}
