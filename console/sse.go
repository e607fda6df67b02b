package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/session"
)

// sseWriter writes one Server-Sent Events stream; every write has a
// deadline, so a client that stops reading is dropped instead of holding
// anything up.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (h *Handler) startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), d: h.sseWrite}
	_ = s.comment("chorus console")
	return s
}

func (s *sseWriter) send(id, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + event + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return s.write(b.String())
}

func (s *sseWriter) comment(c string) error { return s.write(": " + c + "\n\n") }

func (s *sseWriter) write(p string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	if _, err := fmt.Fprint(s.w, p); err != nil {
		return err
	}
	return s.rc.Flush()
}

// tick streams a snapshot every Tick: event name, numbered ids.
func (h *Handler) tick(w http.ResponseWriter, r *http.Request, event string, snap func() any) {
	s := h.startSSE(w)
	t := time.NewTicker(h.opt.Tick)
	defer t.Stop()
	n := uint64(0)
	if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		n = id
	}
	for {
		n++
		if err := s.send(strconv.FormatUint(n, 10), event, snap()); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

func (h *Handler) streamCredentials(w http.ResponseWriter, r *http.Request) {
	h.tick(w, r, "credentials", func() any { return h.credentials() })
}

func (h *Handler) streamBatches(w http.ResponseWriter, r *http.Request) {
	h.tick(w, r, "batches", func() any { return h.batches() })
}

// EventView is one session event on the stream (SSE "event: session",
// its id the event's Seq).
type EventView struct {
	Seq        uint64 `json:"seq"`
	Type       string `json:"type"`
	Turn       int    `json:"turn"`
	Step       int    `json:"step"`
	Attempt    int    `json:"attempt"`
	StepKind   string `json:"step_kind,omitempty"`
	Text       string `json:"text,omitempty"`
	CallID     string `json:"call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	Effect     string `json:"effect,omitempty"`
	ToolStatus string `json:"tool_status,omitempty"`
	Interrupt  string `json:"interrupt,omitempty"`
	Approved   bool   `json:"approved,omitempty"`
	Reason     string `json:"reason,omitempty"`
	TurnStatus string `json:"turn_status,omitempty"`
	Missed     uint64 `json:"missed,omitempty"`
}

func eventView(e session.Event) EventView {
	return EventView{Seq: e.Seq, Type: string(e.Type), Turn: e.Turn, Step: e.Step, Attempt: e.Attempt, StepKind: string(e.StepKind),
		Text: e.Text, CallID: e.CallID, ToolName: e.ToolName, Effect: string(e.Effect), ToolStatus: string(e.ToolStatus),
		Interrupt: e.Interrupt, Approved: e.Approved, Reason: e.Reason, TurnStatus: string(e.TurnStatus), Missed: e.Missed}
}

// keepAlive is the comment period of a quiet session stream.
var keepAlive = 15 * time.Second

// streamSession follows a session's events: each is sent with its Seq as
// the SSE id, so a client that reconnects (EventSource does, with
// Last-Event-ID; or ?after=N) resumes after the last one it got. The
// session's own stream is bounded and never waits for the console; a
// client slower than the write deadline is dropped.
func (h *Handler) streamSession(w http.ResponseWriter, r *http.Request) {
	if h.sess == nil {
		h.writeErr(w, errNoSessions)
		return
	}
	id := r.PathValue("id")
	var after uint64
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	if last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "Last-Event-ID/after: want an event number")
			return
		}
		after = n
	}
	evs, stop := h.sess.events(r.Context(), id, after)
	defer stop()
	s := h.startSSE(w)
	ka := time.NewTicker(keepAlive)
	defer ka.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ka.C:
			if s.comment("keep-alive") != nil {
				return
			}
		case e, ok := <-evs:
			if !ok {
				// The manager closed, or the session's cluster node was lost:
				// the response ends, and the client reconnects with its
				// Last-Event-ID (EventSource does), to this process's next
				// numbering or the next node's.
				return
			}
			if s.send(strconv.FormatUint(e.Seq, 10), "session", eventView(e)) != nil {
				return
			}
		}
	}
}
