package peergw

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if MaybeServe() { // a server process of the scenario's own test
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
