// Package actors holds Chorus's Proto.Actor code: the credential actor that
// is the control plane of one provider credential, the system it runs in,
// and the messages it takes. No protoactor type leaves this package: the
// runtime talks to it through Go values and *actor.PID handles it keeps to
// itself.
//
// The credential actor never sees a delta. A call asks it for admission
// (AdmitRequested), runs its HTTP exchange on the caller's goroutine with the
// credential's providers.Client, writes its events straight into the
// caller's channel, and reports once when it ends (RequestFinished): status,
// usage, and the rate-limit state the provider sent back. From those reports
// the actor learns the provider's limits and paces admissions so that, once
// the limits are known, no request is sent that the provider would refuse.
//
// Everything that must survive a supervised restart (learned limits, the
// admission queue with its waiting callers, counters, learn-once flags)
// lives in a *Credential value outside the actor; the actor is a thin
// behaviour over it, so a restart loses no state and no waiter.
//
// Messages are small plain structs named for what happened or what is asked.
// Replies travel to the sender's PID, never through a Go channel inside a
// message, so the same messages can cross a node boundary once they have an
// encoding.
package actors
