package einosession_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// The crash suite re-executes the test binary as a session process.
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}
