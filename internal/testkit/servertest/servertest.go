// Package servertest holds what the test packages of the server rigs
// (brokertest, zktest) share: a dedicated server stopped when its test
// ends, with its log tail printed when the test failed, and a server
// shared by a test binary, started on first use and stopped by TestMain.
package servertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Server is a running server of a rig.
type Server interface {
	Addr() string
	LogTail(n int) string
	Stop() error
}

// Dedicated starts a server with start (bounded by timeout), stopped when
// the test ends; name labels its messages ("zktest: ZooKeeper").
func Dedicated[S Server](tb testing.TB, name string, timeout time.Duration, start func(context.Context) (S, error)) S {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	srv, err := start(ctx)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("%s: log tail of %s:\n%s", name, srv.Addr(), srv.LogTail(30))
		}
		if err := srv.Stop(); err != nil {
			tb.Errorf("%s: stop %s: %v", name, srv.Addr(), err)
		}
	})
	return srv
}

// Shared is a server shared by the tests of one binary.
type Shared[S Server] struct {
	Name    string // labels its messages ("zktest: shared ZooKeeper")
	Timeout time.Duration
	Start   func(context.Context) (S, error)

	mu      sync.Mutex
	srv     S
	started bool
	err     error
	done    bool
}

// Get returns the server, starting it on first use.
func (s *Shared[S]) Get(tb testing.TB) S {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
		s.srv, s.err = s.Start(ctx)
		s.started = s.err == nil
		cancel()
	}
	if s.err != nil {
		tb.Fatalf("%s: %v", s.Name, s.err)
	}
	return s.srv
}

// Stop stops the server, if one was started; later Gets fail.
func (s *Shared[S]) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.err = errors.New(s.Name + " already stopped")
	if !s.started {
		return nil
	}
	s.started = false
	return s.srv.Stop()
}

// Main runs the tests, then stops the shared server; it returns the exit
// code for os.Exit (1 when the stop failed after passing tests).
func (s *Shared[S]) Main(m *testing.M) int {
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Println(err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
