//go:build unix && !linux

package redisserver

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
