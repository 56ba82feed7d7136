package rmq_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// flushScripts empties the script cache of every master of rdb, as
// another client's SCRIPT FLUSH does.
func flushScripts(ctx context.Context, rdb redis.UniversalClient) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.ScriptFlush(ctx).Err()
		})
	}
	return rdb.ScriptFlush(ctx).Err()
}

// Another client flushing the script cache again and again while
// producers send and a consumer acks loses nothing: every send succeeds
// (a call refused with NOSCRIPT is sent again with its source), and every
// message is delivered and acked once.
func TestScriptFlushUnderLoadLosesNoSend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "flushload", topic.FixedTime, 8)
		c := e.client()
		const senders, each = 4, 300
		var mu sync.Mutex
		acked := map[string]int{}
		all := make(chan struct{})
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			mu.Lock()
			defer mu.Unlock()
			acked[m.ID]++
			if len(acked) == senders*each && acked[m.ID] == 1 {
				close(all)
			}
			return nil
		})))
		e.start(c)

		stop := make(chan struct{})
		var flushes atomic.Int64
		flusherDone := make(chan error, 1)
		go func() {
			for {
				if err := flushScripts(ctx, e.rdb); err != nil {
					flusherDone <- err
					return
				}
				flushes.Add(1)
				select {
				case <-stop:
					flusherDone <- nil
					return
				case <-time.After(2 * time.Millisecond): // a pace for the flushes, not a wait
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, senders*each)
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					id := fmt.Sprintf("s%d-%d", s, i)
					var err error
					if i%10 == 0 {
						_, err = c.Producer().SendBatch(ctx, tp, []producer.BatchMessage{{Body: []byte("b"), At: time.Now(), Key: id}})
					} else {
						_, err = c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now(), producer.WithKey(id))
					}
					if err != nil {
						errs <- fmt.Errorf("%s: %w", id, err)
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		require.NoError(t, <-flusherDone)
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Positive(t, flushes.Load())
		select {
		case <-all:
		case <-time.After(waitLong):
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, acked, senders*each, "every message delivered")
		for id, n := range acked {
			assert.Equal(t, 1, n, "%s delivered %d times", id, n)
		}
	})
}
