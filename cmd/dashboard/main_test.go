package dashboard_test

import (
	"os"
	"testing"

	"github.com/rmq-go/rmq/internal/redistest"
)

// TestMain runs the tests against one shared redis-server, started on first
// use and stopped at the end.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
