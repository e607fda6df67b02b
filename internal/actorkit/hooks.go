package actorkit

import "fmt"

// A cluster node builds a runtime and a session manager that must spawn
// into the node's own system. Neither offers a public option for that (no
// Proto.Actor type may show in their API), so each registers a hook here
// in its init, and cluster calls it: runtime, a func returning its Option
// that sets the system; session, a func building a Manager on a system.

var (
	runtimeHook func(*System) any
	sessionHook func(opt any, s *System) (any, error)
)

// SetRuntimeHook is called by package runtime's init.
func SetRuntimeHook(f func(*System) any) { runtimeHook = f }

// SetSessionHook is called by package session's init.
func SetSessionHook(f func(opt any, s *System) (any, error)) { sessionHook = f }

// RuntimeOption returns the runtime.Option (O) that makes a runtime
// spawn into s.
func RuntimeOption[O any](s *System) O {
	if runtimeHook == nil {
		panic("actorkit: package runtime registered no hook")
	}
	return runtimeHook(s).(O)
}

// NewSessionManager builds a session.Manager (M) from session.Options (O)
// on s.
func NewSessionManager[M, O any](opt O, s *System) (M, error) {
	var zero M
	if sessionHook == nil {
		panic("actorkit: package session registered no hook")
	}
	m, err := sessionHook(opt, s)
	if err != nil {
		return zero, err
	}
	mm, ok := m.(M)
	if !ok {
		return zero, fmt.Errorf("actorkit: session hook returned %T", m)
	}
	return mm, nil
}
