package gateway

import "time"

// SetBatchWindow shortens the completion window of the batches h creates
// from now on (24h otherwise), for the tests of its expiry.
func SetBatchWindow(h *Handler, d time.Duration) { h.batchWindow = d }
