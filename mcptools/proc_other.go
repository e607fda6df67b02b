//go:build !linux

package mcptools

import "os/exec"

// childOfThisProcess does nothing where the kernel cannot kill a child when
// its parent dies; Close still stops every server.
func childOfThisProcess(*exec.Cmd) {}
