package history_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// The quantiles interpolate inside the bucket they fall in; the open last
// bucket says its lower edge.
func TestQuantile(t *testing.T) {
	var h history.Hist
	require.Zero(t, history.Quantile(h, 0.5))
	h[history.Bucket(3*time.Millisecond)] = 100 // (1 ms, 5 ms]
	require.Equal(t, 3*time.Millisecond, history.Quantile(h, 0.5))
	require.Equal(t, 4960*time.Microsecond, history.Quantile(h, 0.99))
	h[history.Bucket(time.Minute)] = 100
	require.Equal(t, 30*time.Second, history.Quantile(h, 0.99))
	require.Equal(t, 0, history.Bucket(-time.Second), "early is the first bucket")
}

// While Redis cannot be reached, counting goes on without waiting and the
// flushes fail (counted); the counts stay in memory and the first flush
// after Redis is back writes them all, with the worker record.
func TestRecorderSurvivesRedisDown(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	var down atomic.Bool
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DisableIdentity: true, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if down.Load() {
				return nil, errors.New("redis is down (test)")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	r := history.New(rdb, history.Config{Prefix: prefix, Retention: time.Hour, Interval: 50 * time.Millisecond, WorkerTTL: 5 * time.Second})
	r.StartWorker(history.NewWorker(func() ([]string, int) { return []string{"orders"}, 3 }))
	ctx := context.Background()

	down.Store(true)
	proxy.CutAll()
	failedBefore := r.Failed()
	began := time.Now()
	const n = 10_000
	for range n {
		r.Add("orders", history.Sent, 1)
		r.Handler("orders", 2*time.Millisecond)
	}
	require.Less(t, time.Since(began), time.Second, "counting does not wait for Redis")
	redistest.Poll(t, func() error {
		if r.Failed() <= failedBefore+1 {
			return fmt.Errorf("%d failed flushes", r.Failed())
		}
		return nil
	})

	down.Store(false)
	redistest.Poll(t, func() error {
		ps, err := history.Read(ctx, rdb, prefix, "orders", time.Now().Add(-2*time.Minute), time.Now())
		if err != nil {
			return err
		}
		var sent, handled int64
		for _, p := range ps {
			sent += p.Count(history.Sent)
			for _, c := range p.Handler {
				handled += c
			}
		}
		if sent != n || handled != n {
			return fmt.Errorf("%d sent, %d handled in Redis", sent, handled)
		}
		return nil
	})
	ws, err := history.Workers(ctx, rdb, prefix)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, []string{"orders"}, ws[0].Topics)
	require.Equal(t, 3, ws[0].Concurrency)
	r.Close(ctx)
	ws, err = history.Workers(ctx, rdb, prefix)
	require.NoError(t, err)
	require.Empty(t, ws)
}

// Counting goes on from several goroutines while flushes take the counts
// out of memory (every millisecond here, so many find a topic with
// nothing counted since the last): every count reaches Redis exactly once,
// and no flush reads a map a counter writes (run with -race; a flush that
// found no counts once iterated the map it left in place).
func TestCountingDuringFlushesLosesNothing(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	r := history.New(rdb, history.Config{Prefix: prefix, Retention: time.Hour, Interval: time.Millisecond})
	r.StartWorker(history.NewWorker(func() ([]string, int) { return []string{"orders"}, 1 }))
	const goroutines, each = 4, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range each {
				r.Add("orders", history.Sent, 1)
				if i%50 == 0 {
					// A pause for flushes to find nothing new: a spin on
					// the clock, as waiting on the flush count would order
					// the counts after the flush for the race detector.
					for began := time.Now(); time.Since(began) < 3*time.Millisecond; {
						runtime.Gosched()
					}
				}
			}
		})
	}
	wg.Wait()
	ctx := context.Background()
	r.Close(ctx)
	ps, err := history.Read(ctx, rdb, prefix, "orders", time.Now().Add(-2*time.Minute), time.Now())
	require.NoError(t, err)
	var sent int64
	for _, p := range ps {
		sent += p.Count(history.Sent)
	}
	require.EqualValues(t, goroutines*each, sent)
}
