package readmecheck

import (
	"context"

	"github.com/chorusrt/chorus/runtime"
)

// docsFrameworksRuntime backs docs/frameworks.md's runtime block, the one
// the three adapters share (theirs are backed in their own modules).
func docsFrameworksRuntime(ctx context.Context) error {
	rt, err := runtime.New(runtime.FromEnv(),
		runtime.WithAlias("smart", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"))
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	return nil
}

var _ = docsFrameworksRuntime
