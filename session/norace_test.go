//go:build !race

package session

// raceDetector says the tests run under the race detector.
const raceDetector = false
