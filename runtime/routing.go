package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/chorusrt/chorus/llm"
)

// Aliases that balance.
//
// An alias registered with WithAlias is an ordered fallback list. One
// registered with WithRoutedAlias has a Strategy, which orders its targets
// afresh for each call; the order is then served exactly as a fallback
// list is (place): a target that fails retryably before the first event,
// cools down past the call's budget or is refused is skipped for the next,
// and a stream never moves after its first event. The strategy only
// chooses the order.
//
// What each strategy knows of a target is what this runtime already
// knows: the calls of the alias it holds (chosen and not finished), the
// calls its provider's credentials have placed on them, their cooldowns and
// Outlooks (room in the window), the concurrency WithLimits or
// WithMaxConcurrency gave them, the prices of WithPrices, and what the
// target's own answers took (time to the response's headers, time per
// output token). A target "has room" when some credential of its provider
// is not cooling down and has room in its window (where its limit is
// known), and the calls on it are fewer than its concurrency (where one is
// set).
//
// Health, for every strategy: a target whose recent calls failed at
// Ejection.Threshold or more (5xx answers, timeouts, transport failures,
// streams that broke; never a 4xx, a 429 or the caller's cancellation)
// is ejected for Ejection.Duration, longer each time it is ejected again
// in a row: it is then ordered last, where only a call every other target
// failed reaches it. When the period ends the target is
// ordered as before, and its first answer decides: a success restores it,
// a failure ejects it again.
//
// Decisions:
//   - Whatever the strategy, the targets healthy with room come first, then
//     those without room now, then the ejected; the strategy orders within
//     each class and chooses among the first class there is. A roomless
//     target is so skipped for one with room (the call would queue at it),
//     and reached only once the others failed the call.
//   - A strategy's pick and its count of the alias's calls on the target
//     are one step under the alias's lock, so concurrent callers see each
//     other's picks (least_busy keeps its targets within one call of each
//     other in a burst).
//   - weighted is smooth weighted round robin (nginx's): deterministic and
//     exact over any run of calls (a random pick drifts by the square root
//     of the calls), never the same target twice in a row where the weights
//     allow.
//   - fastest is power of two choices over a peak EWMA of the time to the
//     response's headers plus the time per output token times the alias's
//     typical answer length, multiplied by the calls it holds (+1). The
//     peak EWMA takes a slower sample at once and a faster one by a fifth;
//     a target not sampled for a while has its estimate pulled toward the
//     others' (half way every probeHalfLife), so a target that was slow is
//     tried again. A target never sampled is tried first.
//   - cheapest is the lowest expected cost of the request (its estimated
//     prompt tokens at the input price plus its MaxTokens, 256 when unset,
//     at the output price); cached input is not foreseen.
//   - cache_affinity keys a request by its shortest leading prefix (tools,
//     then the messages in order, never the last message) that reaches
//     Route.MinPrefixTokens (estimated as a quarter of its bytes), and
//     orders the targets by rendezvous hashing of that key (weighted by
//     Target.Weight): while the first has room and is healthy every
//     request of the prefix goes there, and when it has not the next in
//     the key's own order takes them (so a prefix moves to one place, not
//     to many). A request without so long a prefix is ordered by
//     Route.Otherwise.

// Strategy is how a routed alias orders its targets for a call.
type Strategy string

// The strategies of a routed alias.
const (
	// StrategyFallback keeps the declared order (the order WithAlias
	// gives), with health ejection.
	StrategyFallback Strategy = "fallback"
	// StrategyWeighted puts targets first in proportion to their weights.
	StrategyWeighted Strategy = "weighted"
	// StrategyLeastBusy puts first the target with the fewest calls in
	// flight or waiting, relative to its concurrency.
	StrategyLeastBusy Strategy = "least_busy"
	// StrategyFastest puts first the faster of two targets drawn at
	// random, by a peak EWMA of their latency.
	StrategyFastest Strategy = "fastest"
	// StrategyCheapest puts first the cheapest target with room for the
	// request's size; every target needs a price (WithPrices).
	StrategyCheapest Strategy = "cheapest"
	// StrategyCacheAffinity sends requests that share a long prompt prefix
	// to the same target while it has room.
	StrategyCacheAffinity Strategy = "cache_affinity"
)

// Target is one model of a routed alias.
type Target struct {
	// Model is provider/model.
	Model string
	// Weight is the target's share under StrategyWeighted (and in
	// cache_affinity's hashing); it must be positive there, and zero means 1
	// for the other strategies.
	Weight float64
}

// Ejection tunes outlier ejection; zero fields take the defaults.
type Ejection struct {
	// Threshold is the failed share of recent calls that ejects (default
	// 0.5: half of them).
	Threshold float64
	// MinCalls is how many recent calls it takes to judge (default 10).
	MinCalls int
	// Window is how far back calls are recent (default 30s).
	Window time.Duration
	// Duration is the first ejection's length (default 10s); each ejection
	// in a row adds as much again, up to ten times it.
	Duration time.Duration
	// Off turns ejection off for the alias.
	Off bool
}

// Route is a routed alias: its strategy and targets.
type Route struct {
	// Strategy orders the targets; empty is StrategyFallback.
	Strategy Strategy
	Targets  []Target
	// Otherwise orders cache_affinity's requests without a long prefix
	// (default StrategyLeastBusy); any strategy but cache_affinity.
	Otherwise Strategy
	// MinPrefixTokens is how long (in estimated tokens) a prefix must be
	// for cache_affinity to keep it on one target (default 1024, the
	// shortest prompt Anthropic caches).
	MinPrefixTokens int
	// Eject tunes outlier ejection.
	Eject Ejection
}

// WithRoutedAlias names a routed alias: a call to name is served by r's
// targets in the order r.Strategy gives it, each a fallback for the ones
// before (see Strategy). An unknown strategy, a weight that is not
// positive where it counts, or StrategyCheapest with a target that has no
// price fail New with a *llm.ConfigError naming the alias and the field.
func WithRoutedAlias(name string, r Route) Option {
	return func(o *options) {
		models := make([]string, len(r.Targets))
		for i, t := range r.Targets {
			models[i] = t.Model
		}
		WithAlias(name, models...)(o)
		if o.err != nil {
			return
		}
		if o.routes == nil {
			o.routes = map[string]Route{}
		}
		r.Targets = append([]Target(nil), r.Targets...)
		o.routes[name] = r
	}
}

// Timing knobs; tests set them through a helper and restore them.
var (
	// probeHalfLife is how long a target not sampled takes to have its
	// latency estimate pulled half way toward the others'.
	probeHalfLife = 5 * time.Second
)

// known reports whether s is a strategy.
func (s Strategy) known() bool {
	switch s {
	case StrategyFallback, StrategyWeighted, StrategyLeastBusy, StrategyFastest, StrategyCheapest, StrategyCacheAffinity:
		return true
	}
	return false
}

// router is one routed alias.
type router struct {
	name      string
	strategy  Strategy
	otherwise Strategy
	minPrefix int
	ej        Ejection
	ts        []*routeTarget
	// conc: every target's concurrency is known, and least_busy weighs
	// calls relative to it.
	conc bool

	mu  sync.Mutex // the picks, smooth weights and rng
	swr []float64  // smooth weighted round robin's current weights
	rot int        // rotation among equals
	rng *rand.Rand
}

// routeTarget is what a router knows of one target.
type routeTarget struct {
	r      *router
	name   string
	g      *group
	weight float64
	hash   uint64 // of name, for rendezvous hashing
	price  llm.Price
	priced bool
	conc   int64 // the provider's concurrency (sum of its keys' caps); 0: none set

	pending atomic.Int64 // the alias's calls on it, chosen and not finished
	until   atomic.Int64 // ejectedUntil in Unix nanoseconds, for ejected
	picked  atomic.Int64
	served  atomic.Int64
	failed  atomic.Int64
	// The input of its answers: all of it, and what the cache served.
	input, cached atomic.Int64

	mu sync.Mutex // what follows
	// Peak EWMA estimates, in nanoseconds and tokens; sampled false: none yet.
	ttft, perTok, out float64
	sampled           bool
	lastSample        time.Time
	// Health: the calls of the current and previous windows.
	winStart       time.Time
	cur, prev      [2]int // total, failed
	ejectedUntil   time.Time
	ejections      int
	probing        bool
	totalEjections int64
	lastErrRate    float64
}

// newRouters builds the routers of o's routed aliases, checking them
// (New). Every target resolves already.
func (rt *Runtime) newRouters() error {
	for _, name := range sortedKeys(rt.opts.routes) { // the first error, whatever the map's order
		r := rt.opts.routes[name]
		s := r.Strategy
		if s == "" {
			s = StrategyFallback
		}
		field := "alias " + name
		if !s.known() {
			return &llm.ConfigError{Field: field + " strategy", Msg: fmt.Sprintf("%q is not a strategy (known: fallback, weighted, least_busy, fastest, cheapest, cache_affinity)", r.Strategy)}
		}
		other := r.Otherwise
		if other == "" {
			other = StrategyLeastBusy
		}
		if !other.known() || other == StrategyCacheAffinity {
			return &llm.ConfigError{Field: field + " otherwise", Msg: fmt.Sprintf("%q is not a strategy cache_affinity can fall back to (known: fallback, weighted, least_busy, fastest, cheapest)", r.Otherwise)}
		}
		ej := r.Eject
		if ej.Threshold <= 0 || ej.Threshold > 1 {
			if ej.Threshold != 0 {
				return &llm.ConfigError{Field: field + " eject threshold", Msg: fmt.Sprintf("%v is not a share in (0, 1]", ej.Threshold)}
			}
			ej.Threshold = 0.5
		}
		if ej.MinCalls <= 0 {
			ej.MinCalls = 10
		}
		if ej.Window <= 0 {
			ej.Window = 30 * time.Second
		}
		if ej.Duration <= 0 {
			ej.Duration = 10 * time.Second
		}
		ro := &router{name: name, strategy: s, otherwise: other, minPrefix: r.MinPrefixTokens, ej: ej, conc: true}
		if ro.minPrefix <= 0 {
			ro.minPrefix = 1024
		}
		seed := strHash(fnvOffset, name) // deterministic per alias
		ro.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		weighted := s == StrategyWeighted || (s == StrategyCacheAffinity && other == StrategyWeighted)
		for i, t := range r.Targets {
			tf := fmt.Sprintf("%s targets[%d] (%s)", field, i, t.Model)
			w := t.Weight
			switch {
			case weighted && !(w > 0):
				return &llm.ConfigError{Field: tf + " weight", Msg: fmt.Sprintf("%v is not positive (strategy %s)", w, s)}
			case w < 0 || math.IsNaN(w) || math.IsInf(w, 0):
				return &llm.ConfigError{Field: tf + " weight", Msg: fmt.Sprintf("%v is negative or not a number", w)}
			case w == 0:
				w = 1
			}
			g, _, err := rt.resolveOne(t.Model)
			if err != nil {
				return &llm.ConfigError{Field: tf, Msg: err.Error()}
			}
			for _, o := range ro.ts {
				if o.name == t.Model {
					return &llm.ConfigError{Field: tf, Msg: "appears twice"}
				}
			}
			rtg := &routeTarget{r: ro, name: t.Model, g: g, weight: w, hash: strHash(fnvOffset, t.Model)}
			rtg.price, rtg.priced = rt.opts.prices.Lookup(t.Model)
			if (s == StrategyCheapest || (s == StrategyCacheAffinity && other == StrategyCheapest)) && !rtg.priced {
				return &llm.ConfigError{Field: tf + " price", Msg: "strategy cheapest needs a price for every target (WithPrices)"}
			}
			// Every key of the provider has the same cap (WithLimits is per
			// provider); keys sharing one limit share its cap.
			lim := rt.opts.limits[g.id]
			mc := lim.MaxConcurrency
			if mc == 0 {
				mc = rt.opts.maxConcurrency
			}
			if mc > 0 {
				rtg.conc = int64(mc)
				if !lim.Shared {
					rtg.conc *= int64(len(g.creds))
				}
			}
			if rtg.conc == 0 {
				ro.conc = false
			}
			ro.ts = append(ro.ts, rtg)
		}
		ro.swr = make([]float64, len(ro.ts))
		if rt.routes == nil {
			rt.routes = map[string]*router{}
		}
		rt.routes[name] = ro
	}
	return nil
}

// routeOf sets the routed alias's targets on resolved targets (resolve).
func (rt *Runtime) routeOf(model string, out []target) {
	if ro := rt.routes[model]; ro != nil {
		for i := range out {
			out[i].rs = ro.ts[i]
		}
	}
}

// The span attributes of a routed alias's call.
const (
	attrRouteStrategy = attribute.Key("chorus.route.strategy")
	attrRouteReason   = attribute.Key("chorus.route.reason")
)

// route orders a routed alias's targets for req, in place (ct's targets
// are the same slice), and holds the first for the call (place releases
// it); it tells the call's CallReport and span the strategy and why.
// Targets of a plain alias or model stay as they are.
func (rt *Runtime) route(ctx context.Context, req *llm.ChatRequest, targets []target, ct *callTrace) {
	if len(targets) == 0 || targets[0].rs == nil {
		return
	}
	ro := targets[0].rs.r
	rep := reportOf(ctx)
	span := ct.tc.Span()
	rec := span.IsRecording()
	reason := ro.order(req, targets, time.Now(), rep != nil || rec)
	if rep != nil {
		rep.Strategy, rep.Reason = string(ro.strategy), reason
	}
	if rec {
		span.SetAttributes(attrRouteStrategy.String(string(ro.strategy)), attrRouteReason.String(reason))
	}
}

// order orders targets for req and holds the first; it returns why when
// asked to explain.
func (ro *router) order(req *llm.ChatRequest, targets []target, now time.Time, explain bool) string {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	n := len(targets)
	var buf [8]float64
	var stBuf [8]uint8
	score, st := buf[:0], stBuf[:0]
	if n > len(buf) {
		score, st = make([]float64, 0, n), make([]uint8, 0, n)
	}
	score, st = score[:n], st[:n]
	// Whatever the strategy says, the targets healthy with room come
	// first, then those without room now, then the ejected (the fallback
	// rule: the call reaches them only once the others failed it); a
	// strategy chooses among the best class there is.
	best := uint8(2)
	for i := range targets {
		rs := targets[i].rs
		switch {
		case rs.ejected(now):
			st[i] = 2
		case !rs.room(now):
			st[i] = 1
		}
		best = min(best, st[i])
	}
	s := ro.strategy
	var key uint64
	if s == StrategyCacheAffinity {
		var keyed bool
		if key, keyed = prefixKey(req, ro.minPrefix); !keyed {
			s = ro.otherwise
		}
	}
	total := 0.0 // weighted's sum of weights
	switch s {
	case StrategyFallback:
		for i := range targets {
			score[i] = float64(i)
		}
	case StrategyWeighted:
		// Smooth weighted round robin over the best class: each gains its
		// weight, the highest is chosen and loses the total; the rest
		// follow in declared order.
		pick := -1
		for i := range targets {
			score[i] = float64(i) + 1
			if st[i] != best {
				continue
			}
			rs := targets[i].rs
			k := ro.index(rs)
			ro.swr[k] += rs.weight
			total += rs.weight
			if pick < 0 || ro.swr[k] > ro.swr[ro.index(targets[pick].rs)] {
				pick = i
			}
		}
		ro.swr[ro.index(targets[pick].rs)] -= total
		score[pick] = 0
	case StrategyLeastBusy:
		ro.rot++
		for i := range targets {
			rs := targets[i].rs
			load := float64(rs.busy())
			if ro.conc {
				load /= float64(rs.conc)
			}
			// Equals rotate: a tie breaks by position from a moving start.
			score[i] = load + float64((i+n-ro.rot%n)%n)/float64(4*n)
		}
	case StrategyFastest:
		sum, k := 0.0, 0
		for i := range targets {
			if e, ok := targets[i].rs.estimate(); ok {
				sum += e
				k++
			}
		}
		var cand [8]int
		c := cand[:0]
		for i := range targets {
			score[i] = targets[i].rs.latencyScore(now, sum, k)
			if st[i] == best && len(c) < len(cand) {
				c = append(c, i)
			}
		}
		// Power of two choices among the best class: the better of two
		// drawn at random goes first; the rest follow by their scores.
		if len(c) > 2 {
			a := ro.rng.IntN(len(c))
			b := ro.rng.IntN(len(c) - 1)
			if b >= a {
				b++
			}
			lo, hi := c[a], c[b]
			if score[hi] < score[lo] {
				lo = hi
			}
			score[lo] = -1
		}
	case StrategyCheapest:
		in := float64(estimateCost(req) - outAllowance(req))
		out := float64(outAllowance(req))
		for i := range targets {
			rs := targets[i].rs
			score[i] = (in*rs.price.Input + out*rs.price.Output) / 1e6
		}
	case StrategyCacheAffinity:
		for i := range targets {
			rs := targets[i].rs
			// Weighted rendezvous: the highest -w/ln(u), u uniform in (0,1)
			// from the key and the target, first (w/ln(u) is negative: the
			// lowest).
			u := (float64(mix64(key^rs.hash)>>11) + 0.5) / (1 << 53)
			score[i] = rs.weight / math.Log(u)
		}
	}
	// Insertion sort by class, then score; stable: n is small.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && (st[j] < st[j-1] || (st[j] == st[j-1] && score[j] < score[j-1])); j-- {
			score[j], score[j-1] = score[j-1], score[j]
			st[j], st[j-1] = st[j-1], st[j]
			targets[j], targets[j-1] = targets[j-1], targets[j]
		}
	}
	first := targets[0].rs
	first.pending.Add(1)
	first.picked.Add(1)
	targets[0].held = true
	if !explain {
		return ""
	}
	why := ro.why(s, first, score[0], key, total)
	switch st[0] {
	case 1:
		why += "; no target has room now"
	case 2:
		why += "; every target ejected"
	}
	return why
}

// why says what made s put first first.
func (ro *router) why(s Strategy, first *routeTarget, score float64, key uint64, total float64) string {
	switch s {
	case StrategyWeighted:
		return "weight " + strconv.FormatFloat(first.weight, 'g', -1, 64) + " of " + strconv.FormatFloat(total, 'g', -1, 64)
	case StrategyLeastBusy:
		b := strconv.FormatInt(first.busy()-1, 10)
		if ro.conc {
			return b + " of " + strconv.FormatInt(first.conc, 10) + " busy"
		}
		return b + " busy"
	case StrategyFastest:
		if e, ok := first.estimate(); ok {
			return "estimate " + time.Duration(e).Round(time.Microsecond).String()
		}
		return "not yet sampled"
	case StrategyCheapest:
		return "expected $" + strconv.FormatFloat(score, 'g', 4, 64)
	case StrategyCacheAffinity:
		return "prefix " + strconv.FormatUint(key>>48, 16)
	case StrategyFallback:
		return "declared order"
	}
	return ""
}

// index is rs's position among the router's targets.
func (ro *router) index(rs *routeTarget) int {
	for i, t := range ro.ts {
		if t == rs {
			return i
		}
	}
	return 0
}

// outAllowance is what estimateCost counts for a request's output.
func outAllowance(req *llm.ChatRequest) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return 256
}

// busy is the calls on the target: the alias's, or its provider's placed
// calls (waiting for admission or in flight), whichever is more.
func (rs *routeTarget) busy() int64 {
	b := rs.pending.Load()
	var placed int64
	for _, c := range rs.g.creds {
		placed += c.placed.Load()
	}
	return max(b, placed)
}

// room reports whether the target could take one more call now.
func (rs *routeTarget) room(now time.Time) bool {
	if rs.conc > 0 && rs.busy() >= rs.conc {
		return false
	}
	for _, c := range rs.g.creds {
		ref := c.admitter()
		_, inFlight, cd := ref.Load()
		if cd.After(now) {
			continue
		}
		if ol, ok := ref.(outlooker); ok {
			if o := ol.Outlook(); o.Limit > 0 && int64(o.Free)-max(c.placed.Load()-int64(inFlight), 0) <= 0 {
				continue
			}
		}
		return true
	}
	return false
}

// hold counts a call on t's target from here on, unless route did (place);
// it returns what release undoes.
func (t *target) hold() *routeTarget {
	if t.rs == nil {
		return nil
	}
	if !t.held {
		t.rs.pending.Add(1)
	}
	return t.rs
}

// release ends a call's hold on the target.
func (rs *routeTarget) release() {
	if rs != nil {
		rs.pending.Add(-1)
	}
}

// ejected reports whether the target is ejected at now.
func (rs *routeTarget) ejected(now time.Time) bool {
	if rs.r.ej.Off {
		return false
	}
	until := rs.until.Load()
	return until != 0 && now.UnixNano() < until
}

// estimate is the target's latency estimate in nanoseconds: time to the
// headers plus time per token times the typical answer.
func (rs *routeTarget) estimate() (float64, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.ttft + rs.perTok*rs.out, rs.sampled
}

// latencyScore is fastest's score: the estimate, pulled toward the mean of
// the k sampled estimates (sum mean) the longer it was not sampled, times
// the calls it holds plus one. Zero for a target never sampled.
func (rs *routeTarget) latencyScore(now time.Time, sum float64, k int) float64 {
	rs.mu.Lock()
	e, ok, last := rs.ttft+rs.perTok*rs.out, rs.sampled, rs.lastSample
	rs.mu.Unlock()
	if !ok {
		return 0
	}
	if k > 1 {
		others := (sum - e) / float64(k-1)
		keep := math.Exp2(-float64(now.Sub(last)) / float64(probeHalfLife))
		e = others + (e-others)*keep
	}
	return e * float64(rs.pending.Load()+1)
}

// peak is one peak-EWMA step: a higher sample is taken at once, a lower
// one by a fifth.
func peak(est, x float64) float64 {
	if x >= est {
		return x
	}
	return est + (x-est)*0.2
}

// observe records one placement's outcome on the target: its latency
// (start: after admission; accepted: when the response's headers came,
// zero if they never did) and its health.
func (rs *routeTarget) observe(ctx context.Context, o outcome, start, accepted time.Time) {
	now := time.Now()
	bad := unhealthy(ctx, o.err)
	if o.err == nil {
		rs.served.Add(1)
		u := o.usage
		rs.input.Add(int64(u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens))
		rs.cached.Add(int64(u.CacheReadTokens))
	} else if bad {
		rs.failed.Add(1)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if o.err == nil || bad {
		total := float64(now.Sub(start))
		ttft := total
		if !accepted.IsZero() {
			ttft = float64(accepted.Sub(start))
		}
		per := 0.0
		if toks := o.usage.CompletionTokens; toks > 0 && o.err == nil {
			per = (total - ttft) / float64(toks)
		}
		if !rs.sampled {
			rs.ttft, rs.perTok, rs.out, rs.sampled = ttft, per, float64(o.usage.CompletionTokens), true
		} else {
			rs.ttft, rs.perTok = peak(rs.ttft, ttft), peak(rs.perTok, per)
			if o.err == nil {
				rs.out += (float64(o.usage.CompletionTokens) - rs.out) * 0.2
			}
		}
		rs.lastSample = now
	}
	if rs.r.ej.Off || (o.err != nil && !bad) {
		return
	}
	ej := rs.r.ej
	if rs.probing && !now.Before(rs.ejectedUntil) {
		// The first answer after an ejection decides.
		rs.probing = false
		if bad {
			rs.eject(now)
			return
		}
		rs.ejections = 0
	}
	if now.Sub(rs.winStart) >= ej.Window {
		rs.prev = rs.cur
		if now.Sub(rs.winStart) >= 2*ej.Window {
			rs.prev = [2]int{}
		}
		rs.cur, rs.winStart = [2]int{}, now
	}
	rs.cur[0]++
	if bad {
		rs.cur[1]++
	}
	// The previous window counts for what of it is still within Window.
	f := 1 - float64(now.Sub(rs.winStart))/float64(ej.Window)
	total := float64(rs.cur[0]) + f*float64(rs.prev[0])
	failed := float64(rs.cur[1]) + f*float64(rs.prev[1])
	if total > 0 {
		rs.lastErrRate = failed / total
	}
	if bad && total >= float64(ej.MinCalls) && failed/total >= ej.Threshold {
		rs.eject(now)
	}
}

// eject ejects the target from now; rs.mu is held.
func (rs *routeTarget) eject(now time.Time) {
	rs.ejections++
	rs.totalEjections++
	rs.ejectedUntil = now.Add(rs.r.ej.Duration * time.Duration(min(rs.ejections, 10)))
	rs.until.Store(rs.ejectedUntil.UnixNano())
	rs.probing = true
	rs.cur, rs.prev, rs.winStart = [2]int{}, [2]int{}, now
}

// unhealthy reports whether err says something of the target's health: a
// 5xx or an error inside a stream, a timeout, a transport failure, a
// stream that broke. A 4xx is the request's, a 429 the pacing's, a
// cancellation the caller's.
func unhealthy(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	var rl *llm.RateLimitError
	if errors.As(err, &rl) || errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	var se *llm.StreamError
	var te *llm.TransportError
	if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ae *llm.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == 0 || ae.Status == 408
	}
	return false
}

// prefixKey hashes req's shortest leading prefix of at least min tokens
// (a quarter of its bytes): its tools, then its messages in order, never
// the last. ok is false when no prefix is that long.
func prefixKey(req *llm.ChatRequest, min int) (uint64, bool) {
	h, n := uint64(fnvOffset), 0
	for i := range req.Tools {
		t := &req.Tools[i]
		h = strHash(h, t.Name)
		h = strHash(h, t.Description)
		h = strHash(h, string(t.Parameters))
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if n/4 >= min {
		return h, true
	}
	for i := 0; i < len(req.Messages)-1; i++ {
		m := &req.Messages[i]
		h = strHash(h, string(m.Role))
		h = strHash(h, m.Content)
		n += len(m.Content)
		for _, p := range m.Parts {
			h = strHash(h, p.Text)
			n += len(p.Text)
		}
		for _, tc := range m.ToolCalls {
			h = strHash(h, tc.Name)
			h = strHash(h, tc.Arguments)
			n += len(tc.Name) + len(tc.Arguments)
		}
		if n/4 >= min {
			return h, true
		}
	}
	return 0, false
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// strHash continues a hash h over s and a separator: FNV-1a's scheme
// over 8-byte words (a prompt prefix is kilobytes), then its bytes. The
// same in every process, so that every runtime keeps a prefix on the same
// target.
func strHash(h uint64, s string) uint64 {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h = (h ^ w) * fnvPrime
		h ^= h >> 29
	}
	for ; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff
	h *= fnvPrime
	return h
}

// mix64 is splitmix64's finalizer: a well-spread hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// RouteStats is a snapshot of one routed alias.
type RouteStats struct {
	Alias    string
	Strategy Strategy
	Targets  []RouteTargetStats
}

// RouteTargetStats is what a routed alias knows of one target.
type RouteTargetStats struct {
	// Model is provider/model.
	Model  string
	Weight float64
	// Picked counts the calls the strategy put first on it; Served the
	// placements on it that succeeded; Failed those that failed in a way
	// health counts (5xx, timeouts, transport, broken streams).
	Picked, Served, Failed int64
	// InFlight is the alias's calls on it now (chosen and not finished).
	InFlight int64
	// TTFT is the estimate of the time to the response's headers and
	// PerToken of the time per output token (peak EWMA; zero: not sampled).
	TTFT, PerToken time.Duration
	// ErrorRate is the failed share of its recent calls.
	ErrorRate float64
	// InputTokens adds up the input of the answers it served (uncached,
	// cache reads and writes), CachedTokens the part read from the
	// provider's prompt cache: cache_affinity's measure.
	InputTokens, CachedTokens int64
	// EjectedUntil is when its ejection ends (zero or past: not ejected);
	// Ejections counts its ejections.
	EjectedUntil time.Time
	Ejections    int64
}

// Routes returns a snapshot of every routed alias, by name.
func (rt *Runtime) Routes() []RouteStats {
	out := make([]RouteStats, 0, len(rt.routes))
	for _, name := range sortedKeys(rt.routes) {
		ro := rt.routes[name]
		rs := RouteStats{Alias: name, Strategy: ro.strategy}
		for _, t := range ro.ts {
			t.mu.Lock()
			ts := RouteTargetStats{Model: t.name, Weight: t.weight, Picked: t.picked.Load(), Served: t.served.Load(), Failed: t.failed.Load(),
				InFlight: t.pending.Load(), TTFT: time.Duration(t.ttft), PerToken: time.Duration(t.perTok), ErrorRate: t.lastErrRate,
				EjectedUntil: t.ejectedUntil, Ejections: t.totalEjections, InputTokens: t.input.Load(), CachedTokens: t.cached.Load()}
			t.mu.Unlock()
			rs.Targets = append(rs.Targets, ts)
		}
		out = append(out, rs)
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
