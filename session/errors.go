package session

import "errors"

// Sentinel errors, matched with errors.Is.
var (
	// ErrClosed: the Manager is closed or closing.
	ErrClosed = errors.New("session: manager closed")
	// ErrUnknownSession: the journal has no record of the session.
	ErrUnknownSession = errors.New("session: unknown session")
	// ErrNoActiveTurn: CancelTurn found no turn in progress.
	ErrNoActiveTurn = errors.New("session: no turn in progress")
	// ErrUnknownInterrupt: no interrupt of the session has this id.
	ErrUnknownInterrupt = errors.New("session: unknown interrupt")
	// ErrAlreadyResolved: the interrupt was resolved before (a duplicate
	// resolution).
	ErrAlreadyResolved = errors.New("session: interrupt already resolved")
	// ErrStaleInterrupt: the interrupt can no longer be resolved: its
	// deadline passed or its turn ended.
	ErrStaleInterrupt = errors.New("session: interrupt is stale")
)

// ResolveError is the typed refusal of a resolution. Err is
// ErrUnknownInterrupt, ErrAlreadyResolved or ErrStaleInterrupt.
type ResolveError struct {
	Session   string
	Interrupt string
	Err       error
	// Approved and Reason are the earlier resolution's, for
	// ErrAlreadyResolved; Expired says the deadline resolved it.
	Approved bool
	Expired  bool
	Reason   string
}

func (e *ResolveError) Error() string {
	s := e.Err.Error() + ": session " + e.Session + ", interrupt " + e.Interrupt
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Unwrap returns the sentinel.
func (e *ResolveError) Unwrap() error { return e.Err }
