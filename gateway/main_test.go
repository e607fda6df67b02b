package gateway_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the PostgreSQL of the fleet tests, when one was started
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
