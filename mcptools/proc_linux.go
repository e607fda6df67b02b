package mcptools

import (
	"os/exec"
	"syscall"
)

// childOfThisProcess makes the kernel SIGKILL the server if this process
// dies without stopping it (a crash, SIGKILL): no orphaned server outlives
// the runtime that started it.
func childOfThisProcess(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
