package producer_test

import (
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// TestMain runs the tests and examples against the shared redis-server and
// cluster (started on first use, stopped at the end) and fails when a
// goroutine outlives them.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
