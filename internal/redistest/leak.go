package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

// MainLeakFree is Main that also fails the test binary when a goroutine
// outlives the tests and examples:
//
//	func TestMain(m *testing.M) { redistest.MainLeakFree(m) }
//
// It looks after stopping the shared servers, so that only what the tests
// left running counts. The one goroutine a server leaves by design, the
// thread that starts server processes (procutil's spawner, which must never
// exit), is ignored; opts add what else a package may leave running. It
// does not return.
func MainLeakFree(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(mainRun{m}, append(opts, IgnoreServers())...)
}

// IgnoreServers is the goleak option for the goroutines the server helpers
// keep for the life of the test binary (procutil's spawner thread), for a
// goleak.VerifyNone or a TestMain that cannot use MainLeakFree.
func IgnoreServers() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/rmq-go/rmq/internal/procutil.spawn.func1.1")
}

// mainRun is the goleak.TestingM whose Run is Main: the tests, then
// stopping the shared servers.
type mainRun struct{ m *testing.M }

func (r mainRun) Run() int { return Main(r.m) }
