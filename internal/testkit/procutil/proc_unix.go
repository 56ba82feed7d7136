//go:build unix

package procutil

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group so signals reach a
// forked BGSAVE/AOF-rewrite child too, and (on Linux) asks the kernel to kill
// it when the test binary dies, so an interrupted `go test` leaves no server
// behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
}

func signalGroup(pid int, sig syscall.Signal) error {
	// The group may already be gone after a crash; the leader's pid is the
	// group id because of Setpgid.
	if err := syscall.Kill(-pid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

func SigTerm(pid int) error { return signalGroup(pid, syscall.SIGTERM) }
func SigKill(pid int) error { return signalGroup(pid, syscall.SIGKILL) }
func SigStop(pid int) error { return signalGroup(pid, syscall.SIGSTOP) }
func SigCont(pid int) error { return signalGroup(pid, syscall.SIGCONT) }
