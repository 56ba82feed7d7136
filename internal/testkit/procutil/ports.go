package procutil

import (
	"fmt"
	"net"
	"sync"
	"time"
)

var (
	portsMu  sync.Mutex
	recently = map[int]time.Time{}
)

// freePort asks the kernel for an unused loopback port. The port is free only
// until somebody else binds it, so callers retry on "Address already in use".
// Ports handed out recently by this process are skipped because the kernel may
// offer the same port again before the first server has bound it, which
// happens when the six nodes of a cluster start at once.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	now := time.Now()
	for p, t := range recently {
		if now.Sub(t) > time.Minute {
			delete(recently, p)
		}
	}
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("procutil: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, seen := recently[port]; seen {
			continue
		}
		recently[port] = now
		return port, nil
	}
	return 0, fmt.Errorf("procutil: no fresh free port found")
}
