package cache

import "sync"

// SizeCheck paces a SQL store's checks of its size cap (a check counts the
// table, which costs a scan): after each check the next comes about a
// thousandth of the entries counted later (at most 1,000 writes), so that
// a cap holds to within 0.1% and a write scans a thousand rows on average,
// not the table. The zero value checks at the first write. It is safe for
// concurrent use.
type SizeCheck struct {
	mu   sync.Mutex
	left int // writes until the next check
}

// Due reports whether this write checks the cap lim (never without one).
func (c *SizeCheck) Due(lim Limits) bool {
	if lim.MaxEntries <= 0 && lim.MaxBytes <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left > 0 {
		c.left--
		return false
	}
	return true
}

// Checked sets the writes until the next check from the n entries counted.
func (c *SizeCheck) Checked(n int64) {
	c.mu.Lock()
	c.left = int(min(n/1000, 1000))
	c.mu.Unlock()
}
