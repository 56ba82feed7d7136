package forwardtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// InFlight wraps a listener and keeps the start of every call still
// running, so that a test that stops a broker can wait for the forwards
// that began before the stop to end (each within its publish timeout)
// rather than sleep out that timeout.
type InFlight struct {
	L consumer.MessageListener

	mu      sync.Mutex
	next    uint64
	running map[uint64]time.Time
	ended   chan struct{} // signalled, without blocking, when a call ends
}

// NewInFlight wraps l.
func NewInFlight(l consumer.MessageListener) *InFlight {
	return &InFlight{L: l, running: map[uint64]time.Time{}, ended: make(chan struct{}, 1)}
}

// OnMessage calls the wrapped listener, noting the call while it runs.
func (f *InFlight) OnMessage(ctx context.Context, m *consumer.Message) error {
	f.mu.Lock()
	id := f.next
	f.next++
	f.running[id] = time.Now()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, id)
		f.mu.Unlock()
		select {
		case f.ended <- struct{}{}:
		default:
		}
	}()
	return f.L.OnMessage(ctx, m)
}

// begunBefore counts the calls running that began before at.
func (f *InFlight) begunBefore(at time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.running {
		if s.Before(at) {
			n++
		}
	}
	return n
}

// WaitEnded waits until every call that began before at has returned,
// and fails the test if one still runs after within.
func (f *InFlight) WaitEnded(t *testing.T, at time.Time, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		n := f.begunBefore(at)
		if n == 0 {
			return
		}
		select {
		case <-f.ended:
		case <-deadline.C:
			t.Fatalf("%d calls begun before %v still run after %v", n, at.Format(time.StampMilli), within)
		}
	}
}

// Forwarded counts the messages r saw forwarded (an answer nil), each once
// however often it was.
func (r *Recorder) Forwarded() int {
	ok := map[string]bool{}
	for _, c := range r.Calls() {
		if c.Err == nil {
			ok[c.ID] = true
		}
	}
	return len(ok)
}

// WaitAcksLanded waits until RMQ holds, of the n messages sent to tp, no
// more and no fewer than r did not see forwarded: the acks of the forwards
// that succeeded ride the client's ack rounds, which end a moment after
// the listener returned, and the Redis state shows when they have.
func (e *Env) WaitAcksLanded(tp topic.Topic, r *Recorder, n int) {
	e.T.Helper()
	redistest.Poll(e.T, func() error {
		want := int64(n - r.Forwarded())
		if got := e.Unacked(tp); got != want {
			return fmt.Errorf("%d messages unacked, %d not forwarded", got, want)
		}
		return nil
	})
}
