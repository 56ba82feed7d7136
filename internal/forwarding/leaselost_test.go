package forwarding_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/rmq-go/rmq/internal/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// Issue 25's note, reproduced: a listener that fails at once, with a 1 s
// lease and a 50 ms retry backoff, makes the consumer log "rmq: lease lost"
// warnings although no lease ran out: every attempt was a failure of the
// listener (the sweeper rolled nothing back: no "rmq: lease expired" last
// error, and the attempt count equals the listener calls).
//
// The lease keeper (consumer/lease.go keepLeases) extends every delivery in
// the engine's inflight set (consumer/delivery.go snapshotInflight), which
// keeps a delivery from its fetch until its rollback or ack ended
// (consumer/delivery.go ended). A delivery whose listener returned and
// whose rollback removed it from prepare is still in that set; when the
// keeper's extend.lua runs after the rollback, it finds no prepare entry
// with the delivery's token, answers 0, and keepLeases calls leaseLost
// (consumer/delivery.go leaseLost), which logs the warning and cancels a
// context nobody uses any more.
//
// The acks race the keeper the same way (consumer/acker.go keeps an acked
// delivery in flight until its ack round ended): 20,000 acked messages
// with a 1 s lease gave 34 warnings in one run.
//
// It is a report of what the engine does, not a check of what it should
// do: it fails only if the behaviour is gone (then the engine was fixed;
// turn it into the check that no warning appears). Measured here: 100
// messages, 5,756 listener calls in 5 s, 166 warnings, no lease expired.
func TestLeaseLostWarningsForFailingListener(t *testing.T) {
	if os.Getenv("RMQ_LEASE_LOST_REPRO") == "" {
		t.Skip("reproduction of issue 25's lease-lost note; run with RMQ_LEASE_LOST_REPRO=1")
	}
	e := rmqtest.New(t)
	tp := rmqtest.MustTopic(t, "failfast", topic.FixedTime, 1)
	const messages = 100
	var calls, longest atomic.Int64
	var mu sync.Mutex
	attempts := map[string]int{} // the highest attempt seen per message
	l := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		begin := time.Now()
		calls.Add(1)
		mu.Lock()
		attempts[m.ID] = max(attempts[m.ID], m.Attempt)
		mu.Unlock()
		require.NotEqual(t, "rmq: lease expired", m.LastError, "a lease really ran out")
		defer func() {
			if d := time.Since(begin).Microseconds(); d > longest.Load() {
				longest.Store(d)
			}
		}()
		return errors.New("fails at once")
	})
	c := e.Client()
	require.NoError(t, c.Register(tp, l, consumer.WithPrepareTimeout(time.Second), consumer.WithMaxRetries(consumer.MaxMaxRetries),
		consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond })))
	e.Start(c)
	p := producer.New(e.RDB, producer.WithPrefix(e.Prefix))
	for i := range messages {
		_, err := p.SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	time.Sleep(5 * time.Second)
	require.NoError(t, c.Close(context.Background()))

	log := e.Log.String()
	warnings := strings.Count(log, `msg="rmq: lease lost"`)
	sum := 0
	for _, a := range attempts {
		sum += a
	}
	t.Logf("%d messages, %d listener calls in 5 s (longest %d µs), %d attempts counted, %d \"rmq: lease lost\" warnings, %d lease-lost-while-handling warnings",
		messages, calls.Load(), longest.Load(), sum, warnings, strings.Count(log, "lease lost while handling"))
	require.EqualValues(t, calls.Load(), sum, "every attempt was one listener call: no lease ran out")
	require.Positive(t, warnings, "no spurious warning: the engine no longer reports rolled-back deliveries as lost")
}
