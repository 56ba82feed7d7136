// Package zktest gives tests a real ZooKeeper: dedicated servers stopped at
// the end of the test, an optional server shared by the test binary, and
// go-zookeeper connections that close themselves.
package zktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/servertest"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
)

// startTimeout bounds a server start; a JVM takes about 1 s, several when
// the machine is busy with a -race test run.
const startTimeout = 60 * time.Second

// Start starts a dedicated ZooKeeper with the default 100 ms tick (session
// timeouts 200 ms..2 s), stopped when the test ends.
func Start(tb testing.TB) *zkserver.Server {
	tb.Helper()
	return StartConfig(tb, zkserver.Config{})
}

// StartConfig is Start with a configuration. Lifecycle messages go to
// tb.Logf unless cfg.Logf is set; the server's log tail is printed if the
// test failed.
func StartConfig(tb testing.TB, cfg zkserver.Config) *zkserver.Server {
	tb.Helper()
	if cfg.Logf == nil {
		cfg.Logf = tb.Logf
	}
	return servertest.Dedicated(tb, "zktest: ZooKeeper", startTimeout, func(ctx context.Context) (*zkserver.Server, error) {
		return zkserver.Start(ctx, cfg)
	})
}

var shared = &servertest.Shared[*zkserver.Server]{
	Name: "zktest: shared ZooKeeper", Timeout: startTimeout,
	Start: func(ctx context.Context) (*zkserver.Server, error) {
		return zkserver.Start(ctx, zkserver.Config{})
	},
}

// Shared returns a ZooKeeper shared by all tests of this binary, started on
// first use. Tests must keep to their own znode paths and must not kill or
// suspend it. Stop it with Main or StopShared.
func Shared(tb testing.TB) *zkserver.Server {
	tb.Helper()
	return shared.Get(tb)
}

// StopShared stops the shared server, if one was started.
func StopShared() error { return shared.Stop() }

// VerifyTestMain runs the tests, stops the shared server and then fails the
// test binary if a goroutine is left that is not in
// redistest.LeakOptions(more...) (the servers of both kinds are forked by
// the same procutil thread); it exits the process. For TestMain:
//
//	func TestMain(m *testing.M) { zktest.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M, more ...goleak.Option) {
	goleak.VerifyTestMain(stopAfter{m}, redistest.LeakOptions(more...)...)
}

// stopAfter is a goleak.TestingM whose Run also stops the shared server.
type stopAfter struct{ m *testing.M }

func (s stopAfter) Run() int { return Main(s.m) }

// Main runs the tests, then stops the shared server, and returns the exit
// code: for a TestMain that cannot use VerifyTestMain.
func Main(m *testing.M) int { return shared.Main(m) }

// Connect opens a go-zookeeper connection to srv with the requested session
// timeout (the server clamps it to its bounds), waits until the session is
// established and closes it when the test ends. The event channel is
// returned for tests that watch connection states; it drops events when
// nobody reads it. go-zookeeper's logging is discarded unless options set a
// logger: it logs from its own goroutines, possibly after the test ended.
// Connect sets an event callback to learn of the session: opts must not set
// one (zk.WithEventCallback).
func Connect(tb testing.TB, srv *zkserver.Server, sessionTimeout time.Duration, opts ...func(*zk.Conn)) (*zk.Conn, <-chan zk.Event) {
	tb.Helper()
	session := make(chan struct{})
	var once sync.Once
	onEvent := zk.WithEventCallback(func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			once.Do(func() { close(session) })
		}
	})
	// zk.Connect takes an unexported option type; a variable of that type
	// can still hold a closure that applies the caller's options after ours.
	opt := zk.WithLogger(discard{})
	quiet := opt
	opt = func(c *zk.Conn) {
		quiet(c)
		onEvent(c)
		for _, o := range opts {
			o(c)
		}
	}
	conn, events, err := zk.Connect([]string{srv.Addr()}, sessionTimeout, opt)
	if err != nil {
		tb.Fatalf("zktest: connect %s: %v", srv.Addr(), err)
	}
	tb.Cleanup(conn.Close)
	select {
	case <-session:
	case <-time.After(30 * time.Second):
		tb.Fatalf("zktest: no session with %s after 30 s (state %v)", srv.Addr(), conn.State())
	}
	return conn, events
}

type discard struct{}

func (discard) Printf(string, ...any) {}
