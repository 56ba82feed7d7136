package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqSys runs the cases with hibiken/asynq: tasks of one type in queue q,
// enqueued with Client.Enqueue, handled by a Server with the given workers.
// checkInterval, when set, replaces asynq's TaskCheckInterval (default 1s)
// and DelayedTaskCheckInterval (default 5s).
type asynqSys struct {
	rdb           *redis.Client
	admin         *redis.Client // uncounted: polls for the end of a drain
	s             settings
	checkInterval time.Duration
	version       string
}

func (a *asynqSys) name() string    { return "asynq " + a.version }
func (a *asynqSys) id() string      { return "asynq" }
func (a *asynqSys) timeBased() bool { return true }

func (a *asynqSys) client() *asynq.Client { return asynq.NewClientFromRedisClient(a.rdb) }

func (a *asynqSys) server(q string) *asynq.Server {
	return asynq.NewServerFromRedisClient(a.rdb, asynq.Config{
		Concurrency:              a.s.workers,
		Queues:                   map[string]int{q: 1},
		LogLevel:                 asynq.ErrorLevel,
		TaskCheckInterval:        a.checkInterval,
		DelayedTaskCheckInterval: a.checkInterval,
	})
}

func (a *asynqSys) produce(ctx context.Context, m *meter, q string, n, g int) error {
	c := a.client()
	defer c.Close()
	bufs := make([][]byte, g)
	m.start()
	err := parallel(ctx, n, g, func(w, i int) error {
		bufs[w] = makeBody(bufs[w], a.s.body, "p", i, 0)
		_, err := c.EnqueueContext(ctx, asynq.NewTask("bench", bufs[w]), asynq.Queue(q))
		return err
	})
	m.stop()
	return err
}

// produceBatch: asynq has no batch enqueue.
func (a *asynqSys) produceBatch(context.Context, *meter, string, int, int, int) error {
	return errUnsupported
}

func (a *asynqSys) consume(ctx context.Context, m *meter, q string, n, prefetch int) error {
	if prefetch > 0 {
		return errUnsupported
	}
	c := a.client()
	defer c.Close()
	err := parallel(ctx, n, 32, func(_, i int) error {
		_, err := c.EnqueueContext(ctx, asynq.NewTask("bench", makeBody(nil, a.s.body, "c", i, 0)), asynq.Queue(q))
		return err
	})
	if err != nil {
		return err
	}
	var handled atomic.Int64
	all := make(chan struct{})
	srv := a.server(q)
	m.start()
	err = srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		if handled.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}))
	if err != nil {
		return err
	}
	err = waitAll(ctx, all, &handled, n)
	if err == nil {
		// Done once the last task left the active list (its "ack").
		err = waitEmpty(ctx, a.admin, func() []string {
			return []string{"asynq:{" + q + "}:pending#list", "asynq:{" + q + "}:active#list"}
		})
	}
	m.stop()
	srv.Shutdown()
	return err
}

func (a *asynqSys) lateness(ctx context.Context, q string, lc latCase) (latResult, error) {
	c := a.client()
	defer c.Close()
	rec := newLatRecorder(int(lc.duration.Seconds() * float64(lc.rate)))
	srv := a.server(q)
	err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		rec.record(t.Payload())
		return nil
	}))
	if err != nil {
		return latResult{}, err
	}
	defer srv.Shutdown()
	return runLateness(ctx, lc, a.s.producers, a.s.body, rec, func(ctx context.Context, body []byte, dueMs int64) error {
		_, err := c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(q), asynq.ProcessAt(time.UnixMilli(dueMs)))
		return err
	})
}

func (a *asynqSys) loadFarFuture(ctx context.Context, q, tag string, n int) error {
	c := a.client()
	defer c.Close()
	base := time.Now().Add(365 * 24 * time.Hour)
	return parallel(ctx, n, 32, func(_, i int) error {
		body := makeBody(nil, a.s.body, tag, i, 0)
		_, err := c.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(q), asynq.ProcessAt(base.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		return nil
	})
}
