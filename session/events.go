package session

import (
	"sync"
	"time"
	"unsafe"
)

// EventType says what an Event reports.
type EventType string

// Event types.
const (
	// EventTurnStarted: a turn started.
	EventTurnStarted EventType = "turn_started"
	// EventStepStarted: a step started (Step, StepKind, Attempt).
	EventStepStarted EventType = "step_started"
	// EventTextDelta and EventReasoningDelta carry model output as it
	// streams, in Text.
	EventTextDelta      EventType = "text_delta"
	EventReasoningDelta EventType = "reasoning_delta"
	// EventToolCallStarted: an attempt of a tool call started.
	EventToolCallStarted EventType = "tool_call_started"
	// EventToolCallFinished: an attempt ended (ToolStatus empty when the
	// call will be retried) or the call's record ended.
	EventToolCallFinished EventType = "tool_call_finished"
	// EventApprovalRequested and EventApprovalResolved concern the
	// approval interrupt Interrupt.
	EventApprovalRequested EventType = "approval_requested"
	EventApprovalResolved  EventType = "approval_resolved"
	// EventCompacted: older turns were summarized.
	EventCompacted EventType = "compacted"
	// EventTurnFinished: a turn ended with TurnStatus.
	EventTurnFinished EventType = "turn_finished"
	// EventGap: Missed events were dropped before this reader got them,
	// because it fell behind the stream's bound.
	EventGap EventType = "gap"
)

// Event is one entry of a session's live event stream. Every event
// carries the turn, step and attempt it belongs to; group deltas by them
// (a model step that is retried streams again under the next attempt).
type Event struct {
	// Seq numbers the session's events in this process's numbering, which
	// starts from the clock (microseconds since 1970) when the session's
	// stream is first made here and goes on by one per event, across the
	// session's passivations: a process started later, or another cluster
	// node taking the session over, numbers above what an earlier one used
	// (their clocks agreeing). A reader resumes after the last number it got
	// (see Manager.Events).
	Seq     uint64
	Session string
	Type    EventType
	Turn    int
	Step    int
	Attempt int
	// StepKind is the step's kind, on step and tool events.
	StepKind StepKind
	// Text is the delta of text and reasoning events, and the error of a
	// failed tool attempt.
	Text string
	// Tool fields, on tool and approval events.
	CallID     string
	ToolName   string
	Effect     Effect
	ToolStatus ToolStatus
	// Approval fields.
	Interrupt string
	Approved  bool
	Reason    string
	// TurnStatus is set on turn_finished.
	TurnStatus TurnStatus
	// Missed counts the events a gap stands for. A gap with Missed 0 (or
	// more) also comes first to a reader whose number is not of this
	// numbering (from an earlier process or another node): what happened
	// between is not held here, read the session's snapshot or timeline
	// again; the stream goes on from the oldest event held.
	Missed uint64
}

// eventLog is a session's bounded event stream. Publishing never blocks;
// readers that fall more than the bounds behind see a gap.
type eventLog struct {
	mu       sync.Mutex
	buf      []Event // a ring of the events held, grown up to max
	start    int     // index of the oldest event in buf
	n        int     // events held
	max      int     // bound in events
	maxBytes int     // bound in bytes
	bytes    int     // size of the events held (eventSize)
	origin   uint64  // the first number of this numbering
	next     uint64
	subs     int // readers, guarded by Manager.mu
	notify   chan struct{}
	closed   bool
	done     chan struct{} // closed with the log: readers stop at once
}

// newEventLog returns a log holding at most maxEvents events and maxBytes
// bytes of them, of the numbering that began at origin, whose first event
// will be number next.
func newEventLog(maxEvents, maxBytes int, origin, next uint64) *eventLog {
	return &eventLog{max: maxEvents, maxBytes: maxBytes, origin: origin, next: next, notify: make(chan struct{}), done: make(chan struct{})}
}

// eventOrigin is where a session's numbering starts in this process: the
// clock in microseconds, above what an earlier process used for the
// session unless it published more than a million events a second or
// its clock ran ahead of this one's.
func eventOrigin() uint64 { return max(uint64(time.Now().UnixMicro()), 1) }

// eventSize is what an event counts against the byte bound: its text
// fields plus the struct itself.
func eventSize(ev *Event) int {
	return int(unsafe.Sizeof(*ev)) + len(ev.Text) + len(ev.CallID) + len(ev.ToolName) + len(ev.Interrupt) + len(ev.Reason)
}

// publish numbers ev and holds it, dropping the oldest events past either
// bound (the newest event is always held).
func (l *eventLog) publish(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	ev.Seq = l.next
	l.next++
	size := eventSize(&ev)
	for l.n > 0 && (l.n >= l.max || l.bytes+size > l.maxBytes) {
		l.bytes -= eventSize(&l.buf[l.start])
		l.buf[l.start] = Event{} // its text goes with it
		l.start = (l.start + 1) % len(l.buf)
		l.n--
	}
	if l.n == len(l.buf) {
		l.grow()
	}
	l.buf[(l.start+l.n)%len(l.buf)] = ev
	l.n++
	l.bytes += size
	close(l.notify)
	l.notify = make(chan struct{})
}

// grow doubles the ring (up to max), keeping the events in order: a
// session that publishes little holds little.
func (l *eventLog) grow() {
	buf := make([]Event, min(max(2*len(l.buf), 16), l.max))
	for i := range l.n {
		buf[i] = l.buf[(l.start+i)%len(l.buf)]
	}
	l.buf, l.start = buf, 0
}

// nextSeq is the number the next event will get.
func (l *eventLog) nextSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.notify)
		close(l.done)
	}
}

// held is what since finds: the events with Seq > after still held
// (events), the number of events missed before them (missed), whether
// after is not of this numbering (foreign: the events are then all those
// held, and missed counts this numbering's events no longer held), the
// number before the first of them (before), a channel closed at the next
// publish (wake), and whether the log is closed.
type held struct {
	events  []Event
	missed  uint64
	foreign bool
	before  uint64
	wake    <-chan struct{}
	closed  bool
}

// since returns the events with Seq > after still held, reusing out. After
// 0 asks for every event held.
func (l *eventLog) since(after uint64, out []Event) held {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.next - uint64(l.n)
	h := held{wake: l.notify, closed: l.closed}
	from := after + 1
	h.foreign = after != 0 && (after >= l.next || from < l.origin)
	if after == 0 || h.foreign {
		from = l.origin
	}
	if from < oldest {
		h.missed = oldest - from
		from = oldest
	}
	h.before = from - 1
	out = out[:0]
	for seq := from; seq < l.next; seq++ {
		out = append(out, l.buf[(l.start+int(seq-oldest))%len(l.buf)])
	}
	h.events = out
	return h
}

// subscribe delivers events with Seq > after to out until stop is closed
// or the log is closed (readers then stop without draining).
func (l *eventLog) subscribe(session string, after uint64, out chan<- Event, stop <-chan struct{}) {
	defer close(out)
	var batch []Event
	for {
		h := l.since(after, batch)
		batch = h.events
		if h.missed > 0 || h.foreign {
			gap := Event{Session: session, Type: EventGap, Seq: h.before, Missed: h.missed}
			select {
			case out <- gap:
			case <-stop:
				return
			case <-l.done:
				return
			}
			after = h.before
		}
		for _, ev := range batch {
			select {
			case out <- ev:
				after = ev.Seq
			case <-stop:
				return
			case <-l.done:
				return
			}
		}
		if len(batch) > 0 {
			continue // more may have come meanwhile (or some were dropped)
		}
		if h.closed {
			return
		}
		select {
		case <-h.wake:
		case <-stop:
			return
		case <-l.done:
			return
		}
	}
}

func (a *sessionActor) publish(ev Event) {
	ev.Session = a.id
	a.observe(ev) // telemetry.go
	a.ev.publish(ev)
}
