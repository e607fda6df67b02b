package mcptools

import (
	"os/exec"
	"syscall"
)

// childOfThisProcess makes the kernel SIGKILL the server if this process
// dies without stopping it (a crash, SIGKILL): no orphaned server outlives
// the runtime that started it. (The signal follows the death of the OS
// thread that started the child; Go keeps its threads for the life of the
// process unless a goroutine locked to one exits, which this package never
// does.)
func childOfThisProcess(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
