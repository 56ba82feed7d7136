package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A listener that fails at once, with a 1 s lease and a 50 ms retry
// backoff, makes no "rmq: lease lost" warning: no lease runs out (the
// attempts counted equal the listener calls). The lease keeper extends
// every delivery in flight, and one whose rollback (or ack) committed just
// before its extension is refused the extension: that is no lost lease, and
// the engine no longer says it is (a review counted 166 such warnings in
// 5 s before).
func TestFailingListenerLosesNoLease(t *testing.T) {
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
	// The lease keeper's rounds, told apart by its extension calls: those
	// of one round go out together, rounds a third of a second apart.
	var keepMu sync.Mutex
	var lastExtend time.Time
	rounds := 0
	rdb := e.NewRedis()
	rdb.AddHook(redistest.Observer{Before: func(cmd redis.Cmder) {
		if sha, ok := rmqtest.ScriptSHA(cmd); !ok || sha != scripts.Extend.Hash() {
			return
		}
		keepMu.Lock()
		defer keepMu.Unlock()
		now := time.Now()
		if now.Sub(lastExtend) > 150*time.Millisecond {
			rounds++
		}
		lastExtend = now
	}})
	c := e.ClientOn(rdb)
	require.NoError(t, c.Register(tp, l, consumer.WithPrepareTimeout(time.Second), consumer.WithMaxRetries(consumer.MaxMaxRetries),
		consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond })))
	e.Start(c)
	p := rmqtest.Producer(e.T, e.RDB, e.Prefix)
	for i := range messages {
		_, err := p.SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	// The load runs across several rounds of the lease keeper: the races
	// they provoke are what is tested.
	redistest.Poll(t, func() error {
		keepMu.Lock()
		defer keepMu.Unlock()
		if rounds < 8 {
			return fmt.Errorf("%d rounds of the lease keeper", rounds)
		}
		return nil
	})
	require.NoError(t, c.Close(context.Background()))

	log := e.Log.String()
	warnings := strings.Count(log, `msg="rmq: lease lost"`)
	sum := 0
	for _, a := range attempts {
		sum += a
	}
	t.Logf("%d messages, %d listener calls in %d rounds of the lease keeper (longest %d µs), %d attempts counted, %d \"rmq: lease lost\" warnings, %d lease-lost-while-handling warnings",
		messages, calls.Load(), rounds, longest.Load(), sum, warnings, strings.Count(log, "lease lost while handling"))
	require.EqualValues(t, calls.Load(), sum, "every attempt was one listener call: no lease ran out")
	require.Zero(t, warnings, "a refused extension of an ending delivery is no lost lease")
}
