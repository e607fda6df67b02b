package providers

import (
	"strings"
	"sync/atomic"

	"github.com/chorusrt/chorus/providers/internal/wire"
)

// LearnFlag is one fact a credential learned about its provider.
type LearnFlag uint32

// Learn-once flags. Each is set at most once and never cleared.
const (
	// LearnNoStreamOptions: the provider rejected stream_options.
	LearnNoStreamOptions LearnFlag = 1 << iota
	// LearnBuffered: the provider rejected streaming or answered a stream
	// request with a non-SSE body; streams are served from buffered calls.
	LearnBuffered
	// LearnNoParallelToolCalls: the provider rejected parallel_tool_calls.
	LearnNoParallelToolCalls
	// LearnNoReasoningEffort: the provider rejected reasoning_effort.
	LearnNoReasoningEffort
	// LearnNoTemperature: the provider rejected temperature for the model.
	LearnNoTemperature
	// LearnNoTopP: the provider rejected top_p.
	LearnNoTopP
	// LearnNoSeed: the provider rejected seed.
	LearnNoSeed
)

var learnNames = map[LearnFlag]string{
	LearnNoStreamOptions:     "no_stream_options",
	LearnBuffered:            "buffered",
	LearnNoParallelToolCalls: "no_parallel_tool_calls",
	LearnNoReasoningEffort:   "no_reasoning_effort",
	LearnNoTemperature:       "no_temperature",
	LearnNoTopP:              "no_top_p",
	LearnNoSeed:              "no_seed",
}

// String names the flag.
func (f LearnFlag) String() string {
	if n, ok := learnNames[f]; ok {
		return n
	}
	return "unknown"
}

// Learned is a credential's learn-once state: monotonic, safe for
// concurrent use, shared by every caller of the credential. It is a plain
// value outside any actor so that it survives a supervised restart; pass the
// same *Learned to every Client of the credential with WithLearned.
type Learned struct {
	bits atomic.Uint32
}

// Has reports whether f was learned.
func (l *Learned) Has(f LearnFlag) bool { return l.bits.Load()&uint32(f) != 0 }

// Set records f and reports whether it was new.
func (l *Learned) Set(f LearnFlag) bool {
	for {
		old := l.bits.Load()
		if old&uint32(f) != 0 {
			return false
		}
		if l.bits.CompareAndSwap(old, old|uint32(f)) {
			return true
		}
	}
}

// Flags returns every learned flag in a stable order.
func (l *Learned) Flags() []LearnFlag {
	var out []LearnFlag
	b := l.bits.Load()
	for f := LearnNoStreamOptions; f <= LearnNoSeed; f <<= 1 {
		if b&uint32(f) != 0 {
			out = append(out, f)
		}
	}
	return out
}

func (l *Learned) snapshot() wire.Learned {
	b := l.bits.Load()
	has := func(f LearnFlag) bool { return b&uint32(f) != 0 }
	return wire.Learned{
		NoStreamOptions:     has(LearnNoStreamOptions),
		NoParallelToolCalls: has(LearnNoParallelToolCalls),
		NoReasoningEffort:   has(LearnNoReasoningEffort),
		NoTemperature:       has(LearnNoTemperature),
		NoTopP:              has(LearnNoTopP),
		NoSeed:              has(LearnNoSeed),
	}
}

// LearnEvent reports a newly learned flag to the learn observer.
type LearnEvent struct {
	Provider string
	Flag     LearnFlag
	// Reason is the provider's message that taught it (key-redacted).
	Reason string
}

// classifyRejection reads a 400/422 message for a parameter the provider
// rejects. It returns 0 when the message teaches nothing. The classifiers
// are substring rules on provider messages; each one is only acted on when
// the rejected parameter was actually sent (see sentFlags).
func classifyRejection(msg string, stream bool) LearnFlag {
	m := strings.ToLower(msg)
	rejects := containsAny(m, "not support", "unsupported", "does not support", "not allowed", "disabled", "reject", "unrecognized", "unknown", "invalid", "not permitted", "only the default", "extra inputs")
	switch {
	case strings.Contains(m, "stream_options"):
		return LearnNoStreamOptions
	case strings.Contains(m, "parallel_tool_calls") && rejects:
		return LearnNoParallelToolCalls
	case strings.Contains(m, "reasoning_effort") && rejects:
		return LearnNoReasoningEffort
	case strings.Contains(m, "temperature") && rejects:
		return LearnNoTemperature
	case strings.Contains(m, "top_p") && rejects:
		return LearnNoTopP
	case strings.Contains(m, "seed") && rejects:
		return LearnNoSeed
	case stream && strings.Contains(m, "stream") && rejects:
		return LearnBuffered
	}
	return 0
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
