package main

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills redis-server if the benchmark dies without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
