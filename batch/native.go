package batch

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/telemetry"
)

// Native sends a job's chat lines, and OpenAI's embedding lines, to the
// providers' own batch APIs (OpenAI Batch, Anthropic Message Batches,
// Gemini Batch Mode with inlined requests) instead of the live endpoints.
// Lines that cannot go there run live on the Job's Runner: Gemini
// embedding lines, aliases, providers without a Client here, formats
// without a batch API, and lines a previous native run got back expired
// or cancelled.
type Native struct {
	// Clients are the credentials batches are submitted with, by provider
	// id (the "openai" of "openai/gpt-4.1-mini").
	Clients map[string]*providers.Client
	// Poll is the interval between two polls of a batch (default 30s).
	Poll time.Duration
	// Cancel cancels the job's remote batches (those its journal records)
	// instead of waiting for them, writes what they finished, and runs
	// nothing else.
	Cancel bool
}

// RemoteStatus is a remote batch as the last poll saw it.
type RemoteStatus struct {
	Provider string
	BatchID  string
	// State is the provider's own status ("in_progress", "ended",
	// "BATCH_STATE_RUNNING", ...).
	State                    string
	Total, Succeeded, Failed int
	// Elapsed is the time since the batch was submitted.
	Elapsed time.Duration
}

// native is the native side of one running job.
type native struct {
	r        *run
	opts     Native
	j        *journal
	claims   map[string]*remoteBatch // custom_id -> pending batch of the journal
	retry    map[string]bool         // custom_ids to run live
	held     map[string]*item        // claimed items read from the input
	groups   map[string][]*item      // new lines, by provider (and model on Gemini)
	gorder   []string
	bodies   map[*item][]byte
	skipped  int // Cancel: unclaimed lines not run
	attempts map[string]int
	spans    map[string]*nativeSpan // journal key -> the batch's span (nativetrace.go)
}

// openNative opens the job's journal, next to its output.
func (r *run) openNative() (*native, error) {
	o := r.j.Native
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	jn, err := openJournal(JournalPath(r.j.Output.Path()), r.j.Output.mode)
	if err != nil {
		return nil, err
	}
	n := &native{r: r, opts: *o, j: jn, held: map[string]*item{}, groups: map[string][]*item{}, bodies: map[*item][]byte{}, attempts: map[string]int{}}
	n.claims, n.retry = jn.claimed()
	return n, nil
}

// take decides, while the input is read, whether an item goes native:
// held for a batch that already has it, grouped for a new batch, or (false)
// run live.
func (n *native) take(it *item) bool {
	if it.kind == kindBad || it.customID == "" {
		return false
	}
	if _, ok := n.claims[it.customID]; ok {
		n.held[it.customID] = it
		return true
	}
	if n.opts.Cancel {
		n.skipped++
		return true
	}
	if n.retry[it.customID] {
		return false
	}
	provider, model, ok := strings.Cut(it.model, "/")
	c := n.opts.Clients[provider]
	if !ok || c == nil || apiFor(c) == nil {
		return false
	}
	body, ok := encodeItem(c, it)
	if !ok {
		return false // the live call reports the error, or takes its route
	}
	key := groupKey(c, provider, model, it.kind)
	if _, ok := n.groups[key]; !ok {
		n.gorder = append(n.gorder, key)
	}
	n.groups[key] = append(n.groups[key], it)
	n.bodies[it] = body
	return true
}

// encodeItem is the body of an item as the provider's batch API carries
// it: the live call's body, its model named without the provider prefix
// as the runtime sends it. ok is false for an item that runs live: an
// error the live call reports, a route the batch API does not serve
// (Responses), an embedding line of a format without embedding batches.
func encodeItem(c *providers.Client, it *item) (body []byte, ok bool) {
	_, model, _ := strings.Cut(it.model, "/")
	switch it.kind {
	case kindChat:
		r := *it.chat
		r.Model = model
		path, body, err := c.EncodeChat(&r)
		return body, err == nil && nativePath(c.Config().Format, path)
	case kindEmbed:
		r := *it.embed
		r.Model = model
		_, body, err := c.EncodeEmbed(&r)
		return body, err == nil
	}
	return nil, false
}

// groupKey names the batch group of an item: the provider, plus the model
// on Gemini (a Gemini batch names its model) or "#embed" for OpenAI
// embedding lines (a batch serves one endpoint).
func groupKey(c *providers.Client, provider, model string, k kind) string {
	switch {
	case k == kindEmbed:
		return provider + embedSuffix
	case c.Config().Format == providers.FormatGemini:
		return provider + "/" + model
	}
	return provider
}

const embedSuffix = "#embed"

// splitKey undoes groupKey.
func splitKey(key string) (provider, model, endpoint string) {
	endpoint = URLChat
	if p, ok := strings.CutSuffix(key, embedSuffix); ok {
		key, endpoint = p, URLEmbeddings
	}
	provider, model, _ = strings.Cut(key, "/")
	return provider, model, endpoint
}

// nativePath reports whether a live call's path is the one its format's
// batch API serves (an OpenAI model routed to the Responses API is not).
func nativePath(f providers.Format, path string) bool {
	switch f {
	case providers.FormatOpenAI:
		return path == "/chat/completions"
	case providers.FormatAnthropic:
		return path == "/v1/messages"
	case providers.FormatGemini:
		return strings.HasSuffix(path, ":generateContent")
	}
	return false
}

// splitAt, when positive, caps the lines of one batch below the API's
// own limits (tests set it to see a job split).
var splitAt = 0

func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "chorus-" + hex.EncodeToString(b)
}

// SubmitError is a batch the provider refused; its lines were not
// submitted and a resumed job runs them live.
type SubmitError struct {
	Provider string
	Lines    int
	Err      error
}

func (e *SubmitError) Error() string {
	return fmt.Sprintf("%s refused a batch of %d line(s): %v", e.Provider, e.Lines, e.Err)
}
func (e *SubmitError) Unwrap() error { return e.Err }

// run finishes the native side once the input is read: recovers batches
// whose submit answer was lost, cancels (Cancel) or submits, then polls
// every batch until it ends and writes its results. It returns when every
// batch ended or ctx ended (the remote batches keep running; a resumed job
// picks them up).
func (n *native) run(ctx context.Context, results chan<- *result) error {
	var errs []error
	pending := n.j.pending()
	for _, b := range pending {
		if b.batchID != "" {
			continue
		}
		if err := n.recover(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	if n.opts.Cancel {
		for _, b := range n.j.pending() {
			if b.batchID == "" {
				continue
			}
			if err := n.api(b.provider).cancel(ctx, b.batchID); err != nil {
				errs = append(errs, fmt.Errorf("cancelling %s batch %s: %w", b.provider, b.batchID, err))
			}
		}
	} else {
		for _, key := range n.gorder {
			if err := n.submit(ctx, key, n.groups[key]); err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					return errors.Join(errs...)
				}
			}
		}
	}
	if err := n.wait(ctx, results); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (n *native) api(provider string) batchAPI {
	c := n.opts.Clients[provider]
	if c == nil {
		return nil
	}
	return apiFor(c)
}

// recover looks for the batch of an intent whose submit answer was lost.
// Found, it is recorded; not found, the submit never took effect, the
// intent is closed and its lines are submitted again.
func (n *native) recover(ctx context.Context, b *remoteBatch) error {
	api := n.api(b.provider)
	if api == nil {
		return fmt.Errorf("the journal names a %s batch, but no %s credential is set", b.provider, b.provider)
	}
	id, found, err := api.find(ctx, b.token, len(b.ids), b.at)
	if err != nil {
		return fmt.Errorf("looking for the %s batch %s: %w", b.provider, b.token, err)
	}
	if found {
		return n.j.record(journalRecord{Op: "submitted", Key: b.key, BatchID: id})
	}
	if err := n.j.record(journalRecord{Op: "ended", Key: b.key}); err != nil {
		return err
	}
	if n.opts.Cancel {
		return nil
	}
	var again []*item
	for _, id := range b.ids {
		if it := n.held[id]; it != nil {
			delete(n.held, id)
			again = append(again, it)
		}
	}
	if len(again) == 0 {
		return nil
	}
	key := b.provider
	switch {
	case b.endpoint == URLEmbeddings:
		key += embedSuffix
	case b.model != "":
		key += "/" + b.model
	}
	c := n.opts.Clients[b.provider]
	kept := again[:0]
	for _, it := range again {
		if _, ok := n.bodies[it]; !ok {
			if body, ok := encodeItem(c, it); ok {
				n.bodies[it] = body
			}
		}
		if _, ok := n.bodies[it]; ok {
			kept = append(kept, it)
		}
	}
	again = kept
	if _, ok := n.groups[key]; !ok {
		n.gorder = append(n.gorder, key)
	}
	n.groups[key] = append(again, n.groups[key]...)
	return nil
}

// submit sends one group as one or more batches (split at the API's
// limits). The intent is durable before the submit starts and the id as
// soon as it is known.
func (n *native) submit(ctx context.Context, key string, items []*item) error {
	provider, model, endpoint := splitKey(key)
	api := n.api(provider)
	maxN, maxBytes := api.limits()
	if splitAt > 0 {
		maxN = min(maxN, splitAt)
	}
	for len(items) > 0 {
		size, k := 0, 0
		for k < len(items) && k < maxN && (k == 0 || size+len(n.bodies[items[k]])+256 <= maxBytes) {
			size += len(n.bodies[items[k]]) + 256
			k++
		}
		chunk := items[:k]
		items = items[k:]
		reqs := make([]nativeReq, len(chunk))
		ids := make([]string, len(chunk))
		for i, it := range chunk {
			reqs[i], ids[i] = nativeReq{customID: it.customID, body: n.bodies[it], url: endpoint}, it.customID
		}
		b := journalRecord{Op: "intent", Key: n.j.nextKey(), Provider: provider, Model: model, Token: newToken(), IDs: ids, At: time.Now().UTC()}
		if endpoint != URLChat {
			b.Endpoint = endpoint
		}
		if err := n.j.record(b); err != nil {
			return err
		}
		for _, it := range chunk {
			n.held[it.customID] = it
		}
		span := n.batchSpan(ctx, b.Key, provider, model, endpoint, len(ids), false)
		id, err := api.submit(ctx, b.Token, model, reqs)
		if err != nil {
			var ae *llm.APIError
			if ctx.Err() == nil && errors.As(err, &ae) && ae.Status/100 == 4 {
				// Refused outright: nothing was created. Give the lines back.
				n.endBatchSpan(b.Key, "refused", err)
				if rerr := n.j.record(journalRecord{Op: "ended", Key: b.Key, Retry: ids}); rerr != nil {
					return rerr
				}
				n.r.emit(Event{Kind: EventRemote, Remote: &RemoteStatus{Provider: provider, State: "refused", Total: len(ids)}, Err: err})
				return &SubmitError{Provider: provider, Lines: len(ids), Err: err}
			}
			n.endBatchSpan(b.Key, "submit_unanswered", err)
			return fmt.Errorf("submitting a %s batch (a resumed job finds it or submits it again): %w", provider, err)
		}
		span.submitted(id)
		if err := n.j.record(journalRecord{Op: "submitted", Key: b.Key, BatchID: id}); err != nil {
			return err
		}
		n.r.emit(Event{Kind: EventRemote, Remote: &RemoteStatus{Provider: provider, BatchID: id, State: "submitted", Total: len(ids)}})
	}
	return nil
}

// wait polls the pending batches until each ends, and writes its results.
// A batch whose results cannot be read after a few rounds stays pending in
// the journal (a resumed job reads them) and is reported.
func (n *native) wait(ctx context.Context, results chan<- *result) error {
	failures := map[string]error{}
	defer n.endAllBatchSpans() // those the run leaves running
	for {
		waiting := 0
		for _, b := range n.j.pending() {
			if b.batchID == "" || failures[b.key] != nil && n.attempts[b.key] >= maxFinishAttempts {
				continue
			}
			span := n.batchSpan(ctx, b.key, b.provider, b.model, cmp.Or(b.endpoint, URLChat), len(b.ids), true)
			if span.id != b.batchID { // a batch submitted by an earlier run
				span.id = b.batchID
				span.span.SetAttributes(telemetry.AttrBatchID.String(b.batchID))
			}
			api := n.api(b.provider)
			if api == nil {
				n.attempts[b.key] = maxFinishAttempts
				failures[b.key] = fmt.Errorf("the journal names %s batch %s, but no %s credential is set", b.provider, b.batchID, b.provider)
				n.endBatchSpan(b.key, span.lastState, failures[b.key])
				continue
			}
			waiting++
			st, err := api.poll(ctx, b.batchID)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				span.span.AddEvent(EventPollFailed, trace.WithAttributes(semconv.ErrorTypeKey.String(telemetry.ErrorType(err))))
				n.r.emit(Event{Kind: EventRemote, Remote: &RemoteStatus{Provider: b.provider, BatchID: b.batchID, State: "poll failed"}, Err: err})
				var ae *llm.APIError
				if errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != 429 {
					// The provider does not know the batch (deleted, another
					// key): polling will not bring it back.
					n.attempts[b.key]++
					failures[b.key] = fmt.Errorf("polling %s batch %s: %w", b.provider, b.batchID, err)
				}
				continue // polled again next round
			}
			n.polled(ctx, span, b, st)
			n.r.emit(Event{Kind: EventRemote, Remote: &RemoteStatus{Provider: b.provider, BatchID: b.batchID, State: st.State,
				Total: st.Total, Succeeded: st.Succeeded, Failed: st.Failed, Elapsed: time.Since(b.at)}})
			if !st.Ended {
				continue
			}
			if err := n.finish(ctx, api, b, st, results); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				n.attempts[b.key]++
				failures[b.key] = err
			} else {
				delete(failures, b.key)
				n.endBatchSpan(b.key, st.State, nil)
			}
		}
		if waiting == 0 {
			var errs []error
			for _, k := range sortedKeysOf(failures) {
				errs = append(errs, failures[k])
				n.endBatchSpan(k, "", failures[k])
			}
			return errors.Join(errs...)
		}
		t := time.NewTimer(n.opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// maxFinishAttempts is how many rounds an ended batch's results are tried.
const maxFinishAttempts = 3

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// finish writes an ended batch's results (each custom_id at most once,
// so a download cut by a kill is simply done again) and closes it in the
// journal; requests it did not run are given back to run live.
func (n *native) finish(ctx context.Context, api batchAPI, b *remoteBatch, st remoteStatus, results chan<- *result) error {
	items, err := api.results(ctx, b.batchID, st, b.ids)
	if err != nil {
		return fmt.Errorf("reading the results of %s batch %s: %w", b.provider, b.batchID, err)
	}
	sort.SliceStable(items, func(i, k int) bool { return items[i].customID < items[k].customID })
	var retry []string
	now := time.Now()
	span := n.spans[b.key]
	var written, failed int
	for _, ri := range items {
		it := n.held[ri.customID]
		if it == nil {
			it = &item{customID: ri.customID, kind: kindChat, model: b.provider + "/" + b.model}
		}
		res := &result{item: it, native: true, start: b.at, end: now}
		if ri.code != "" {
			retry = append(retry, ri.customID)
			res.notRun, res.err = ri.code, fmt.Errorf("%s batch %s: %s", b.provider, b.batchID, ri.code)
			n.traceLine(ctx, span, b, res, now)
			results <- res
			continue
		}
		if n.r.j.Output.Done(ri.customID) {
			continue // written before a kill
		}
		var line outputLine
		if ri.err != nil {
			res.failed, res.err = true, ri.err
			line = errorLine(ri.customID, ri.err)
		} else if ri.emb != nil {
			served := servedModel(ri.emb.Meta, ri.emb.Model, it.model)
			res.usage, res.served = ri.emb.Usage, served
			res.cost, res.saved = n.r.j.Prices.costOf(served, ri.emb.Usage, true), n.r.j.Prices.savingOf(served, ri.emb.Usage)
			body := embeddingBody(ri.emb, it.model, it.b64)
			body.Usage.Cost = res.cost.usd()
			line = successLine(ri.customID, ri.requestID, body)
		} else {
			served := servedModel(ri.res.Meta, ri.res.Model, it.model)
			res.usage, res.served = ri.res.Usage, served
			res.cost, res.saved = n.r.j.Prices.costOf(served, ri.res.Usage, true), n.r.j.Prices.savingOf(served, ri.res.Usage)
			body := completionBody(ri.res, it.model, now)
			body.Usage.Cost = res.cost.usd()
			line = successLine(ri.customID, ri.res.Meta.RequestID, body)
		}
		out, err := encodeLine(line)
		if err != nil {
			return err
		}
		if err := n.r.j.Output.write(ri.customID, out); err != nil {
			return err
		}
		res.written = true
		n.traceLine(ctx, span, b, res, time.Now())
		if res.failed {
			failed++
		} else {
			written++
		}
		results <- res
	}
	if span != nil {
		span.span.AddEvent(EventResults, trace.WithAttributes(AttrSucceeded.Int(written), AttrFailed.Int(failed), AttrNotRun.Int(len(retry))))
	}
	return n.j.record(journalRecord{Op: "ended", Key: b.key, Retry: retry})
}
