package runtime

import (
	"sync"
	"sync/atomic"

	"github.com/chorusrt/chorus/actors"
)

// joint is the one budget an endpoint's keys are paced as once their
// reports show that they share one limit, undeclared (an organisation's or
// a project's limit, as OpenAI and Anthropic count them): the same as
// Limits.Shared declares from the start.
//
// Each key starts with a budget of its own, the right reading for keys
// with limits of their own. When every key's reports show others drawing
// on its budget (the provider counted more than the key's grants explain,
// or refused a request paced within what it reported) and all report one
// request limit, the keys draw on one limit: from then on their calls ask
// the joint budget, which starts from the newest report any key holds,
// less all they have in flight, and hears each of those calls end with its
// report (actors.Ref.Adopt): what the provider had counted already comes
// back, and the window of the join is served whole. Each key's own state
// only finishes what it granted: callers queued there, or on their way,
// are refused with an error actors.Diverted reports and ask the joint
// budget instead. Paced apart, each key could count only on its share of
// what was reported, and what one key left unused in a window the others
// could not know of: 1.1-2x the time the limit allows in the pacing
// matrix, where one budget takes 1.00-1.05x.
//
// The join is for good: a process whose keys each share their limit with
// someone else (keys of two organisations, each also used elsewhere) can
// read as one limit, and is then paced as the stricter one, slower but
// without 429s it would not otherwise get. Keys of one endpoint that
// report no limits (Gemini) are never joined: nothing tells them apart.
type joint struct {
	ref  *actors.Ref
	keys []*actors.Ref // the endpoint's keys' own budgets
	on   atomic.Bool
	mu   sync.Mutex // one join
	// ready is closed once the joint budget serves (on): a caller a key
	// refused as diverted waits for it rather than ask the key again.
	ready chan struct{}
}

// admitter is what a call on c asks for admission: the joint budget once
// its endpoint's keys have been joined, c's own otherwise.
func (c *cred) admitter() actors.Admitter {
	if j := c.joint; j != nil && j.on.Load() {
		return j.ref
	}
	return c.ref
}

// joined reports whether c's endpoint's keys are paced as one budget since
// their reports showed they share one limit.
func (c *cred) joined() bool { return c.joint != nil && c.joint.on.Load() }

// suspect has a key that has not seen others drawing on its budget paced
// as if it had (actors.CredentialState.Suspect) once another key with the
// same request limit has: keys of one organisation see each other's
// requests only while their windows overlap, and a key that saw none
// bursts its whole limit into the others' share. Keys with limits of
// their own lose half their pace for two windows, once, when another key
// with the same limit is shared with someone else.
func (j *joint) suspect() {
	limit := 0
	for _, k := range j.keys {
		if shared, l := k.Cred.Sharing(); shared && l > 0 {
			limit = l
			break
		}
	}
	if limit == 0 {
		return
	}
	for _, k := range j.keys {
		if shared, l := k.Cred.Sharing(); !shared && l == limit {
			k.Cred.Suspect()
		}
	}
}

// check joins the keys once each one's reports show others drawing on its
// budget and all report one request limit. Called after a key's call
// finished; cheap (atomic loads) until then.
func (j *joint) check() {
	if j.on.Load() {
		return
	}
	j.suspect()
	limit := 0
	for _, k := range j.keys {
		shared, l := k.Cred.Sharing()
		if !shared || l <= 0 || (limit != 0 && l != limit) {
			return
		}
		limit = l
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.on.Load() {
		return
	}
	// The keys stop granting first (their queued callers are refused and
	// ask the joint budget), so that what they have in flight when it
	// adopts their state is all they granted. Adopted first, a key whose
	// window turned in between granted its queue beside the joint
	// budget's own burst: 429s on a provider that reports its limits.
	for _, k := range j.keys {
		k.Divert()
	}
	j.ref.Adopt(j.keys...)
	j.on.Store(true)
	close(j.ready)
}
