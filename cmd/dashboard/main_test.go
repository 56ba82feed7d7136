package dashboard_test

import (
	"os"
	"slices"
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// TestMain runs the tests against one shared redis-server, started on first
// use and stopped at the end, and then checks that no goroutine was left
// running (the dashboard starts none; the ZooKeeper view ends its
// connection's before it answers).
//
// With serveArg in its arguments the test binary is a dashboard process
// instead (browser_history_test.go).
func TestMain(m *testing.M) {
	if i := slices.Index(os.Args, serveArg); i >= 0 {
		os.Exit(serveDashboard(os.Args[i+1:]))
	}
	redistest.VerifyTestMain(m)
}
