//go:build !unix

package procutil

import (
	"errors"
	"os"
	"os/exec"
)

var ErrNoSignals = errors.New("procutil: process signals are not supported on this OS")

func setProcAttr(*exec.Cmd) {}

func SigTerm(pid int) error { return SigKill(pid) }
func SigKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
func SigStop(int) error { return ErrNoSignals }
func SigCont(int) error { return ErrNoSignals }
