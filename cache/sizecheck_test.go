package cache

import "testing"

// TestSizeCheckPaces: no cap, no check; with one, the first write checks,
// and after a count of n entries the next n/1000 writes (at most 1,000)
// do not.
func TestSizeCheckPaces(t *testing.T) {
	var c SizeCheck
	if c.Due(Limits{}) {
		t.Fatal("a check without a cap")
	}
	lim := Limits{MaxEntries: 10}
	if !c.Due(lim) {
		t.Fatal("the first write does not check")
	}
	c.Checked(5000)
	for i := range 5 {
		if c.Due(lim) {
			t.Fatalf("write %d after a count of 5,000 checks", i)
		}
	}
	if !c.Due(lim) {
		t.Fatal("the sixth write does not check")
	}
	c.Checked(10_000_000)
	n := 0
	for !c.Due(lim) {
		n++
	}
	if n != 1000 {
		t.Fatalf("%d writes between checks of a large table, want 1000", n)
	}
}
