//go:build unix && !linux

package zkserver

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
