package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// sumHistory adds up the points of a history.
func sumHistory(ps []rmq.MetricPoint) (sum rmq.MetricPoint) {
	for _, p := range ps {
		sum.Sent += p.Sent
		sum.Completed += p.Completed
		sum.Retried += p.Retried
		sum.Dead += p.Dead
		sum.Expired += p.Expired
		sum.Cancelled += p.Cancelled
		sum.Forwarded += p.Forwarded
	}
	return sum
}

// A client's sends and deliveries reach the topic's per-minute history in
// Redis, which a new inspector reads back; the keys expire after the
// retention; a started client is listed in Workers until Close, which
// removes it at once.
func TestHistoryAndWorkers(t *testing.T) {
	for _, b := range rmqtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := rmqtest.NewFor(t, b)
			ctx := rmqtest.Ctx(t)
			tp := rmqtest.MustTopic(t, "hist", topic.FixedTime, 4)
			const n, failing = 60, 10
			c, err := rmq.New(e.RDB, rmq.WithPrefix(e.Prefix), rmq.WithLogger(e.Logger), rmq.WithHistory(2*time.Hour))
			require.NoError(t, err)
			var acked atomic.Int64
			done := make(chan struct{})
			require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
				if m.Attempt == 1 && m.Body[0] == 'f' {
					return consumer.SkipRetry(errors.New("poison"))
				}
				if acked.Add(1) == n-failing {
					close(done)
				}
				return nil
			}), consumer.WithConcurrency(3)))
			require.NoError(t, c.Start(ctx))
			closed := false
			defer func() {
				if !closed {
					_ = c.Close(context.Background())
				}
			}()

			in := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix))
			redistest.Poll(t, func() error {
				ws, err := in.Workers(ctx)
				require.NoError(t, err)
				if len(ws) != 1 || ws[0].ID != rmq.WorkerID(c) {
					return fmt.Errorf("workers %+v", ws)
				}
				require.Equal(t, []string{"hist"}, ws[0].Topics)
				require.Equal(t, 3, ws[0].Concurrency)
				return nil
			})

			for i := range n {
				body := fmt.Sprintf("ok-%d", i)
				if i < failing {
					body = fmt.Sprintf("fail-%d", i)
				}
				_, err := c.Producer().SendFixedTime(ctx, tp, []byte(body), time.Now())
				require.NoError(t, err)
			}
			<-done
			require.NoError(t, c.Close(ctx))
			closed = true
			ws, err := in.Workers(ctx)
			require.NoError(t, err)
			require.Empty(t, ws, "Close removes the worker record at once")

			ps, err := in.History(ctx, tp, time.Now().Add(-5*time.Minute))
			require.NoError(t, err)
			require.Len(t, ps, 6)
			sum := sumHistory(ps)
			require.Equal(t, rmq.MetricPoint{Sent: n, Completed: n - failing, Dead: failing}, sum)
			var seen bool
			for _, p := range ps {
				if p.Completed > 0 {
					require.Positive(t, p.HandlerP99)
					seen = true
				}
			}
			require.True(t, seen)

			// Every written minute expires with the retention, counted
			// from the minute's start.
			for _, p := range ps {
				if p.Sent+p.Completed+p.Dead == 0 {
					continue
				}
				ttl, err := e.RDB.TTL(ctx, history.Key(e.Prefix, "hist", p.Minute)).Result()
				require.NoError(t, err)
				want := time.Until(p.Minute.Add(2 * time.Hour))
				require.InDelta(t, want.Seconds(), ttl.Seconds(), 5, "ttl %v", ttl)
			}
		})
	}
}

// WithHistory(0) writes no history and no worker record.
func TestHistoryOff(t *testing.T) {
	e := rmqtest.New(t)
	ctx := rmqtest.Ctx(t)
	tp := rmqtest.MustTopic(t, "off", topic.FixedTime, 1)
	c, err := rmq.New(e.RDB, rmq.WithPrefix(e.Prefix), rmq.WithLogger(e.Logger), rmq.WithHistory(0))
	require.NoError(t, err)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })))
	require.NoError(t, c.Start(ctx))
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now())
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	in := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix))
	ps, err := in.History(ctx, tp, time.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, rmq.MetricPoint{}, sumHistory(ps))
	ws, err := in.Workers(ctx)
	require.NoError(t, err)
	require.Empty(t, ws)
	_, err = rmq.New(e.RDB, rmq.WithHistory(-time.Second))
	require.ErrorIs(t, err, rmq.ErrInvalidOption)
}
