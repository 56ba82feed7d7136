package consumer_test

import (
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// TestMain runs the examples against a throwaway redis-server (started on
// first use, stopped at the end) and fails when a goroutine outlives them.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
