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
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver"
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
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := brokerserver.StartNATS(ctx, cfg)
	if err != nil {
		tb.Fatalf("brokertest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("brokertest: log tail of nats-server %s:\n%s", srv.Addr(), srv.LogTail(30))
		}
		if err := srv.Stop(); err != nil {
			tb.Errorf("brokertest: stop nats-server %s: %v", srv.Addr(), err)
		}
	})
	return srv
}

// RabbitMQ starts a dedicated RabbitMQ node, stopped when the test ends;
// for tests that stop, kill or restart it. Others use SharedRabbitMQ.
func RabbitMQ(tb testing.TB) *brokerserver.RabbitMQ {
	tb.Helper()
	cfg := brokerserver.RabbitMQConfig{Logf: tb.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := brokerserver.StartRabbitMQ(ctx, cfg)
	if err != nil {
		tb.Fatalf("brokertest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("brokertest: log tail of RabbitMQ %s:\n%s", srv.Addr(), srv.LogTail(30))
		}
		if err := srv.Stop(); err != nil {
			tb.Errorf("brokertest: stop RabbitMQ %s: %v", srv.Addr(), err)
		}
	})
	return srv
}

var (
	sharedMu   sync.Mutex
	sharedRMQ  *brokerserver.RabbitMQ
	sharedErr  error
	sharedDone bool
)

// SharedRabbitMQ returns a RabbitMQ node shared by all tests of this
// binary, started on first use. Tests must keep to exchanges and queues of
// their own and must not stop or restart it.
func SharedRabbitMQ(tb testing.TB) *brokerserver.RabbitMQ {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if !sharedDone {
		sharedDone = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		sharedRMQ, sharedErr = brokerserver.StartRabbitMQ(ctx, brokerserver.RabbitMQConfig{})
		cancel()
	}
	if sharedErr != nil {
		tb.Fatalf("brokertest: shared RabbitMQ: %v", sharedErr)
	}
	return sharedRMQ
}

// StopShared stops the shared node, if one was started.
func StopShared() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sharedDone = true
	sharedErr = errors.New("brokertest: shared RabbitMQ already stopped")
	if sharedRMQ == nil {
		return nil
	}
	err := sharedRMQ.Stop()
	sharedRMQ = nil
	return err
}

// Main runs the tests, then stops the shared node; for TestMain. It
// returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Println(err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
