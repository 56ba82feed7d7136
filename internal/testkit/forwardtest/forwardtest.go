// Package forwardtest is what the forwarders' tests share: messages sent
// due at known times with known bodies and headers, the check that a
// broker received each of them once and not before its time, a listener
// that records what a forwarder answered, and a forwarder in a child
// process that a test kills with SIGKILL (worker.go).
package forwardtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/forwarding"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// WaitLong bounds a wait for something that must happen.
const WaitLong = 60 * time.Second

// Env is one test's Redis client, key prefix and library log.
type Env struct{ *rmqtest.Env }

// New is an Env on the shared redis-server (use redistest.Main in
// TestMain).
func New(t *testing.T) *Env { return &Env{rmqtest.New(t)} }

// Topic is a fixed-time topic of four slots.
func (e *Env) Topic(name string) topic.Topic {
	return rmqtest.MustTopic(e.T, name, topic.FixedTime, 4)
}

// Forward starts a client that consumes tp with l, closed when the test
// ends (before the brokers, whose cleanups were registered earlier).
func (e *Env) Forward(tp topic.Topic, l consumer.MessageListener, opts ...consumer.Option) *rmq.Client {
	e.T.Helper()
	c := e.Client()
	require.NoError(e.T, c.Register(tp, l, opts...))
	e.Start(c)
	return c
}

// Expect is what the broker must receive of one message.
type Expect struct {
	Due     time.Time
	Body    []byte
	Headers map[string]string
}

// Sent maps the ids of sent messages to what the broker must receive.
type Sent map[string]Expect

// Body is message i's body: text, then bytes that are not text, so a
// forwarder that treats bodies as strings or lines shows.
func Body(i int) []byte {
	return append([]byte(fmt.Sprintf("body-%05d|", i)), 0, 1, 0x7f, 0x80, 0xff, '\r', '\n', 0)
}

// Headers are message i's headers: a W3C trace context and one more.
func Headers(i int) map[string]string {
	return map[string]string{
		"traceparent": fmt.Sprintf("00-%032x-%016x-01", 0xabc000+i, 0xdef000+i),
		"tenant":      fmt.Sprintf("tenant-%d", i%7),
	}
}

// ID is message i's key.
func ID(i int) string { return fmt.Sprintf("m-%05d", i) }

// SendDue sends n messages to tp with ids ID(i), bodies Body(i) and headers
// Headers(i), due evenly over [from, from+spread).
func (e *Env) SendDue(tp topic.Topic, n int, from time.Time, spread time.Duration, opts ...producer.SendOption) Sent {
	e.T.Helper()
	p := rmqtest.Producer(e.T, e.RDB, e.Prefix)
	sent := make(Sent, n)
	const chunk = 500
	for lo := 0; lo < n; lo += chunk {
		var batch []producer.BatchMessage
		for i := lo; i < min(lo+chunk, n); i++ {
			due := from.Add(spread * time.Duration(i) / time.Duration(n)).Truncate(time.Millisecond)
			sent[ID(i)] = Expect{Due: due, Body: Body(i), Headers: Headers(i)}
			o := append([]producer.SendOption{producer.WithHeaders(Headers(i))}, opts...)
			batch = append(batch, producer.BatchMessage{Key: ID(i), Body: Body(i), At: due, Options: o})
		}
		_, err := p.SendBatch(context.Background(), tp, batch)
		require.NoError(e.T, err)
	}
	return sent
}

// Received is what a broker-side consumer got of one message.
type Received struct {
	At      time.Time // when the consumer received it
	DedupID string    // the broker's deduplication id (Nats-Msg-Id, message-id, record key)
	Body    []byte
	Headers map[string]string
}

// Check asserts that got holds every sent message (dups: more than once
// allowed), none received before its due time, each with its body, its
// headers and the rmq-* headers, its RMQ id as dedup id, and nothing else.
func (s Sent) Check(t *testing.T, tp topic.Topic, got []Received, dups bool) {
	t.Helper()
	seen := map[string]int{}
	early, bad := 0, 0
	for _, r := range got {
		id := r.Headers[forwarding.HeaderID]
		want, ok := s[id]
		if !ok {
			bad++
			if bad < 5 {
				t.Errorf("received a message with rmq-id %q that was not sent", id)
			}
			continue
		}
		seen[id]++
		if r.At.Before(want.Due) {
			early++
			if early < 5 {
				t.Errorf("%s received at %v, %v before its due time", id, r.At.Format(time.RFC3339Nano), want.Due.Sub(r.At))
			}
		}
		if seen[id] > 1 {
			continue
		}
		ok = assert.Equal(t, id, r.DedupID, "dedup id") &&
			assert.Equal(t, want.Body, r.Body, "body of %s", id) &&
			assert.Equal(t, tp.Name(), r.Headers[forwarding.HeaderTopic]) &&
			checkDue(t, id, want.Due, r.Headers)
		for k, v := range want.Headers {
			ok = ok && assert.Equal(t, v, r.Headers[k], "header %s of %s", k, id)
		}
		if !ok {
			bad++
			if bad > 3 {
				t.FailNow()
			}
		}
	}
	missing, doubled := 0, 0
	for id := range s {
		switch n := seen[id]; {
		case n == 0:
			missing++
		case n > 1:
			doubled++
		}
	}
	require.Zero(t, missing, "of %d sent messages %d never arrived", len(s), missing)
	if !dups {
		require.Zero(t, doubled, "%d messages arrived more than once", doubled)
	}
	require.Zero(t, early, "messages received before their due time")
	require.Zero(t, bad)
}

// checkDue: rmq-due-at is when the delivery came due, the sent due time
// on a first attempt and the retry's time on a later one.
func checkDue(t *testing.T, id string, sent time.Time, h map[string]string) bool {
	t.Helper()
	due, err := time.Parse(forwarding.DueAtLayout, h[forwarding.HeaderDueAt])
	if !assert.NoError(t, err, "rmq-due-at of %s", id) {
		return false
	}
	if h[forwarding.HeaderAttempt] == "1" {
		return assert.True(t, due.Equal(sent), "rmq-due-at of %s: %v, sent due %v", id, due, sent)
	}
	return assert.False(t, due.Before(sent), "rmq-due-at of %s: %v, before the sent due %v", id, due, sent) &&
		assert.NotEmpty(t, h[forwarding.HeaderAttempt])
}

// Call is one answer of a recorded listener.
type Call struct {
	ID      string
	Attempt int
	Err     error
}

// Recorder wraps a forwarder and records its answers.
type Recorder struct {
	L consumer.MessageListener

	mu    sync.Mutex
	calls []Call
	ok    chan Call
}

// NewRecorder wraps l.
func NewRecorder(l consumer.MessageListener) *Recorder {
	return &Recorder{L: l, ok: make(chan Call, 1<<16)}
}

// OnMessage calls the wrapped listener and records its answer.
func (r *Recorder) OnMessage(ctx context.Context, m *consumer.Message) error {
	err := r.L.OnMessage(ctx, m)
	c := Call{ID: m.ID, Attempt: m.Attempt, Err: err}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if err == nil {
		select {
		case r.ok <- c:
		default:
		}
	}
	return err
}

// Calls returns the answers so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Failed counts the answers that were errors.
func (r *Recorder) Failed() int {
	n := 0
	for _, c := range r.Calls() {
		if c.Err != nil {
			n++
		}
	}
	return n
}

// NextOK waits for the next successful forward.
func (r *Recorder) NextOK(t *testing.T, within time.Duration) Call {
	t.Helper()
	select {
	case c := <-r.ok:
		return c
	case <-time.After(within):
		t.Fatalf("no successful forward within %v; answers: %v", within, r.Calls())
		return Call{}
	}
}

// Stats reads tp's queue sizes.
func (e *Env) Stats(tp topic.Topic) rmq.Stats {
	e.T.Helper()
	st, err := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix)).Stats(context.Background(), tp)
	require.NoError(e.T, err)
	return st
}

// Dead lists tp's dead messages.
func (e *Env) Dead(tp topic.Topic) []rmq.DeadMessage {
	e.T.Helper()
	d, err := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix)).Dead(context.Background(), tp, rmq.WithLimit(1000))
	require.NoError(e.T, err)
	return d
}

// Eventually waits until cond holds, polling every 20 ms.
func Eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Unacked is how many of tp's messages RMQ still holds waiting or in
// flight.
func (e *Env) Unacked(tp topic.Topic) int64 {
	st := e.Stats(tp)
	return st.Store + st.Prepare
}

// HoldsFor checks, every 100 ms for d, that tp keeps exactly unacked
// messages waiting or in flight and none dead: nothing acked, nothing
// dead while the broker is away.
func (e *Env) HoldsFor(tp topic.Topic, d time.Duration, unacked int64) {
	e.T.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		st := e.Stats(tp)
		require.Equal(e.T, unacked, st.Store+st.Prepare, "messages acked while the broker was away (store %d, prepare %d)", st.Store, st.Prepare)
		require.Zero(e.T, st.Dead, "messages dead while the broker was away")
		time.Sleep(100 * time.Millisecond)
	}
}

// ErrStopped is what a test's broker-side consumer returns once stopped.
var ErrStopped = errors.New("forwardtest: stopped")
