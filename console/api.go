package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

// apiTimeout bounds one API request's work (the streams excepted).
const apiTimeout = 15 * time.Second

// ErrorBody is the API's error answer: {"error": {"code", "message"}};
// an already-resolved approval adds the earlier resolution.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo says what went wrong. Code is stable: unauthorized, read_only,
// csrf, bad_request, not_found, unknown_session, unknown_interrupt,
// already_resolved, stale_interrupt, no_active_turn, no_sessions, closed,
// timeout, internal; of the keys' admin API, unknown_key, conflict,
// revoked and no_keystore.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Approved, Expired and Reason are the earlier resolution's, on
	// already_resolved.
	Approved *bool  `json:"approved,omitempty"`
	Expired  bool   `json:"expired,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Field names the field of the body at fault, on a bad_request of the
	// keys' admin API ("budget_usd", "models[1]", "body" for a body that
	// is not JSON).
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorInfo{Code: code, Message: msg}})
}

// writeErr answers a session-layer error.
func (h *Handler) writeErr(w http.ResponseWriter, err error) {
	if errors.Is(err, errNoSessions) {
		writeError(w, http.StatusNotFound, "no_sessions", "this console has no session manager")
		return
	}
	status, code := statusOf(err)
	info := ErrorInfo{Code: code, Message: err.Error()}
	var re *session.ResolveError
	if code == "already_resolved" && errors.As(err, &re) {
		ok := re.Approved
		info.Approved, info.Expired, info.Reason = &ok, re.Expired, re.Reason
	}
	if status == http.StatusInternalServerError {
		h.log.Warn("console: request failed", "error", err.Error())
	}
	writeJSON(w, status, ErrorBody{Error: info})
}

func (h *Handler) apiCredentials(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.credentials())
}

func (h *Handler) apiBatches(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.batches())
}

func (h *Handler) apiBatch(w http.ResponseWriter, r *http.Request) {
	if h.opt.Batches != nil {
		if p, ok := h.opt.Batches.Job(r.PathValue("job")); ok {
			writeJSON(w, http.StatusOK, batchView(p, h.now()))
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "no batch job "+r.PathValue("job"))
}

func (h *Handler) apiSessions(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	switch state {
	case "", StateWaitingApproval, StateRunning, StateFailed, StateIdle:
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "state: want waiting_approval, running, failed or idle")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.sessionsView(ctx, state)
	if err != nil {
		h.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *Handler) apiSession(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.sessionView(ctx, r.PathValue("id"))
	if err != nil {
		h.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *Handler) apiApprovals(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.approvals(ctx)
	if err != nil {
		h.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *Handler) apiCluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, h.clusterView(ctx))
}

// ResolveRequest is the body of POST .../approve and .../reject.
type ResolveRequest struct {
	Interrupt string `json:"interrupt"`
	Note      string `json:"note,omitempty"`
}

// ResolveResponse answers a resolution that was accepted.
type ResolveResponse struct {
	Session   string `json:"session"`
	Interrupt string `json:"interrupt"`
	Approved  bool   `json:"approved"`
}

// decodeBody reads a JSON body of at most 1 MiB into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return false
	}
	return true
}

func (h *Handler) apiResolve(approved bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req ResolveRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if req.Interrupt == "" {
			writeError(w, http.StatusBadRequest, "bad_request", "interrupt is required")
			return
		}
		if h.sess == nil {
			h.writeErr(w, errNoSessions)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		id := r.PathValue("id")
		if err := h.sess.resolve(ctx, id, req.Interrupt, approved, req.Note); err != nil {
			h.writeErr(w, err)
			return
		}
		h.log.Info("console: approval resolved", "session", id, "interrupt", req.Interrupt, "approved", approved)
		writeJSON(w, http.StatusOK, ResolveResponse{Session: id, Interrupt: req.Interrupt, Approved: approved})
	}
}

func (h *Handler) apiCancel(w http.ResponseWriter, r *http.Request) {
	if h.sess == nil {
		h.writeErr(w, errNoSessions)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	id := r.PathValue("id")
	if err := h.sess.cancel(ctx, id); err != nil {
		h.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": id, "cancelled": true})
}

// SendRequest is the body of POST .../messages: a user message.
type SendRequest struct {
	Text string `json:"text"`
}

func (h *Handler) apiSend(w http.ResponseWriter, r *http.Request) {
	var req SendRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if h.sess == nil {
		h.writeErr(w, errNoSessions)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	id := r.PathValue("id")
	if err := h.sess.send(ctx, id, llm.UserText(req.Text)); err != nil {
		h.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"session": id, "queued": true})
}
