package gateway

import "time"

// SetBatchWindow shortens the completion window of the batches h creates
// from now on (24h otherwise), for the tests of its expiry.
func SetBatchWindow(h *Handler, d time.Duration) { h.batchWindow = d }

// SetFleetTiming shortens the fleet agent's tick and idle periods for a
// test, restored at its end.
func SetFleetTiming(t interface{ Cleanup(func()) }, tick, idle time.Duration) {
	oldTick, oldIdle, oldBeat := fleetTick, fleetIdle, fleetHeartbeat
	fleetTick, fleetIdle, fleetHeartbeat = tick, idle, tick
	t.Cleanup(func() { fleetTick, fleetIdle, fleetHeartbeat = oldTick, oldIdle, oldBeat })
}
