package llmtest

// Dynamic replies. A scripted Step (Push) always answers first; when the
// script is empty, a responder set with SetResponder computes the Step from
// the request itself, and only without one does the default reply answer.
// A simulator uses it to answer each prompt deterministically, and a test
// to answer by request content instead of by arrival order.

// SetResponder makes fn answer every request that finds the script empty:
// chat requests of every format and the other operations alike (for those,
// a Reply's Usage, Header and text apply as they do to scripted steps, and
// a Fault acts as it does there). fn receives the request as Requests
// records it; it runs on the request's goroutine, possibly for several
// requests at once, without the server's lock held, and must not modify the
// Recorded it is given. A request refused by the rate-limit emulation may
// still have been shown to fn. A Fault whose Kind is zero means
// FaultStatus, as in Push. nil removes the responder.
func (s *Server) SetResponder(fn func(Recorded) Step) {
	s.mu.Lock()
	s.respond = fn
	s.mu.Unlock()
}

// dynamicStep asks the responder for the Step of request x when the script
// is empty. It reports false when there is no responder or the script still
// holds steps.
func (s *Server) dynamicStep(x *exchange) (Step, bool) {
	s.mu.Lock()
	fn := s.respond
	empty := len(s.script) == 0
	var rec Recorded
	if fn != nil && empty && x.seq > 0 && x.seq <= len(s.reqs) {
		rec = s.reqs[x.seq-1]
	} else {
		fn = nil
	}
	s.mu.Unlock()
	if fn == nil {
		return Step{}, false
	}
	st := fn(rec)
	if st.Fault != nil && st.Fault.Kind == 0 {
		f := *st.Fault
		f.Kind = FaultStatus
		st.Fault = &f
	}
	return st, true
}
