package rmq_test

import (
	"os"
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// TestMain runs the tests and examples against one shared redis-server and
// one shared Redis cluster (both started on first use, stopped at the end)
// and fails when a goroutine outlives them; or, when the environment asks
// for it, plays the consumer worker that kill_test.go re-executes this
// binary as (and kills with SIGKILL).
func TestMain(m *testing.M) {
	switch os.Getenv(workerEnv) {
	case "1":
		os.Exit(runWorker())
	case flowWorkerRole:
		os.Exit(runFlowWorker())
	case histWorkerRole:
		os.Exit(runHistWorker())
	case lifeWorkerRole:
		os.Exit(runLifeWorker())
	case treeWorkerRole:
		os.Exit(runTreeWorker())
	}
	if os.Getenv(schedWorkerEnv) == "1" {
		os.Exit(runSchedWorker())
	}
	redistest.VerifyTestMain(m)
}
