// Package brokertest gives tests real brokers: dedicated nats-server and
// RabbitMQ nodes stopped at the end of the test, and a RabbitMQ node shared
// by the test binary (a node takes about ten seconds to boot, so tests that
// do not stop it share one).
//
// Use it with a TestMain so the shared node is stopped at the end:
//
//	func TestMain(m *testing.M) { os.Exit(brokertest.Main(m)) }
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver"
	"github.com/rmq-go/rmq/internal/testkit/servertest"
)

// startTimeout bounds a broker start; RabbitMQ boots in about ten seconds,
// more when the machine is busy with a -race run.
const startTimeout = 2 * time.Minute

// NATS starts a dedicated nats-server with JetStream, stopped when the test
// ends.
func NATS(tb testing.TB) *brokerserver.NATS {
	tb.Helper()
	return NATSConfig(tb, brokerserver.NATSConfig{})
}

// NATSConfig is NATS with a configuration. Lifecycle messages go to tb.Logf
// unless cfg.Logf is set; the server's log tail is printed if the test
// failed.
func NATSConfig(tb testing.TB, cfg brokerserver.NATSConfig) *brokerserver.NATS {
	tb.Helper()
	if cfg.Logf == nil {
		cfg.Logf = tb.Logf
	}
	return servertest.Dedicated(tb, "brokertest: nats-server", startTimeout, func(ctx context.Context) (*brokerserver.NATS, error) {
		return brokerserver.StartNATS(ctx, cfg)
	})
}

// RabbitMQ starts a dedicated RabbitMQ node, stopped when the test ends;
// for tests that stop, kill or restart it. Others use SharedRabbitMQ.
func RabbitMQ(tb testing.TB) *brokerserver.RabbitMQ {
	tb.Helper()
	cfg := brokerserver.RabbitMQConfig{Logf: tb.Logf}
	return servertest.Dedicated(tb, "brokertest: RabbitMQ", startTimeout, func(ctx context.Context) (*brokerserver.RabbitMQ, error) {
		return brokerserver.StartRabbitMQ(ctx, cfg)
	})
}

var shared = &servertest.Shared[*brokerserver.RabbitMQ]{
	Name: "brokertest: shared RabbitMQ", Timeout: startTimeout,
	Start: func(ctx context.Context) (*brokerserver.RabbitMQ, error) {
		return brokerserver.StartRabbitMQ(ctx, brokerserver.RabbitMQConfig{})
	},
}

// SharedRabbitMQ returns a RabbitMQ node shared by all tests of this
// binary, started on first use. Tests must keep to exchanges and queues of
// their own and must not stop or restart it.
func SharedRabbitMQ(tb testing.TB) *brokerserver.RabbitMQ {
	tb.Helper()
	return shared.Get(tb)
}

// StopShared stops the shared node, if one was started.
func StopShared() error { return shared.Stop() }

// Main runs the tests, then stops the shared node; for TestMain. It
// returns the exit code for os.Exit.
func Main(m *testing.M) int { return shared.Main(m) }
