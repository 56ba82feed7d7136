//go:build !unix

package zkserver

import (
	"errors"
	"os"
	"os/exec"
)

var errNoSignals = errors.New("zkserver: process signals are not supported on this OS")

func setProcAttr(*exec.Cmd) {}

func sigTerm(pid int) error { return sigKill(pid) }
func sigKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
func sigStop(int) error { return errNoSignals }
func sigCont(int) error { return errNoSignals }
