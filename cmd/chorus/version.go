package main

import (
	"fmt"

	"github.com/chorusrt/chorus/internal/version"
)

// cmdVersion prints the Chorus version the binary was built from (module
// version, VCS revision when stamped) and its Go toolchain: what
// GET /version of chorus serve answers and the console's footer shows.
func cmdVersion(e env, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "chorus version: takes no arguments (got %q)\n", args)
		return 2
	}
	v := version.Get()
	fmt.Fprintf(e.stdout, "chorus %s %s\n", v, v.Go)
	return 0
}
