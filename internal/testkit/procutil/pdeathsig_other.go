//go:build unix && !linux

package procutil

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
