package procutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// waitStopped waits, up to two seconds, until every thread of pid is in
// the stopped state. SIGSTOP is delivered asynchronously: a thread busy on
// another CPU can still answer a request after kill returns, so a caller
// that tests "a suspended server does not answer" must wait for it.
func waitStopped(pid int) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return // gone, or no /proc: nothing to wait for
		}
		stopped := true
		for _, t := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			// The state follows the command name, which is in parentheses.
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
