// Package racy holds one deliberate data race in this module's own code, so
// that racefilter's test can check it catches a real one.
package racy

import (
	"sync"
	"testing"
)

var counter int

func bump() { counter++ }

func TestRace(t *testing.T) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); bump() }()
	}
	wg.Wait()
}
