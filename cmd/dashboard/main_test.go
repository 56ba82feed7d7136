package dashboard_test

import (
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// TestMain runs the tests against one shared redis-server, started on first
// use and stopped at the end, and then checks that no goroutine was left
// running (the dashboard starts none; the ZooKeeper view ends its
// connection's before it answers).
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
