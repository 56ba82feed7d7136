//go:build !linux

package procutil

// waitStopped has no portable way to observe a stopped process; elsewhere
// Suspend returns as soon as the signal is sent.
func waitStopped(int) {}
