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

// SetFleetBatchTiming shortens a fleet batch's lease, its renewal, the
// flush of its output lines and the agent's look for batches to take,
// for a test, restored at its end.
func SetFleetBatchTiming(t interface{ Cleanup(func()) }, ttl, renew, flush, scan time.Duration) {
	o1, o2, o3, o4 := fleetBatchTTL, fleetBatchRenew, fleetBatchFlush, fleetBatchScan
	fleetBatchTTL, fleetBatchRenew, fleetBatchFlush, fleetBatchScan = ttl, renew, flush, scan
	t.Cleanup(func() { fleetBatchTTL, fleetBatchRenew, fleetBatchFlush, fleetBatchScan = o1, o2, o3, o4 })
}

// Kill stops h as a SIGKILL would for the store: its batch jobs and its
// fleet agent stop, and nothing more reaches the store (no last flush of
// output lines, no release of a batch's lease, no settlement). Close
// still frees what it holds afterwards.
func Kill(h *Handler) {
	h.batches.killed.Store(true)
	h.batches.mu.Lock()
	h.batches.stop()
	h.batches.mu.Unlock()
	h.batches.wg.Wait()
	if h.fleet != nil {
		h.fleet.stop()
		<-h.fleet.done
	}
}
