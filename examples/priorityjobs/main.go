// Command priorityjobs runs background jobs highest priority first, with
// RMQ's Priority messages, and shows what happens to a job that keeps
// failing.
//
// One worker (concurrency 1) takes the queued jobs one at a time, highest
// priority first. A failed job is retried after a delay (the backoff, or
// the one the handler asks for with consumer.RetryAfter), and then ranks
// below every fresh job, so one broken job cannot hold up the queue. After
// its retries
// (consumer.WithMaxRetries) it moves to the topic's dead queue, where the
// Inspector (or `rmqctl dead`) finds it with its last error.
//
// The story: five jobs; charging the card of order 1002 fails every time
// (the payment gateway is down): it fails once among the fresh jobs, twice
// more after them, and ends dead.
//
// It talks to the Redis that REDIS_URL names (default 127.0.0.1:6379):
//
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/priorityjobs
//
// scripts/demo.sh runs it, with the other examples, against a throwaway
// redis-server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

var jobs = topic.MustNew("jobs", topic.Priority, 4)

// maxRetries: a job runs at most 1+maxRetries times.
const maxRetries = 2

var errGatewayDown = errors.New("payment gateway unavailable")

func main() {
	opts, err := redisOptions(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "priorityjobs:", err)
		os.Exit(2)
	}
	rdb := redis.NewClient(opts)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The prefix keeps the example's keys apart from any other RMQ user of
	// this Redis (the default prefix is "rmq").
	err = run(ctx, rdb, "rmq-example", os.Stdout)
	stop()
	rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "priorityjobs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rdb *redis.Client, prefix string, out io.Writer) (err error) {
	start := time.Now()
	lg := log.New(out, "", 0)
	say := func(format string, args ...any) {
		lg.Printf("[+%.3fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	if err != nil {
		return err
	}
	closed := false
	closeClient := func() error {
		if closed {
			return nil
		}
		closed = true
		// Close lets the running job finish and waits for its ack (or, for
		// a failure, its move to the retry queue or the dead queue).
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.Close(cctx)
	}
	defer func() { err = errors.Join(err, closeClient()) }()

	queued := []struct {
		name     string
		priority int64 // at least topic.MinPriority (17); higher runs first
	}{
		{"rebuild-search-index", 20},
		{"send-password-reset-email", 100},
		{"generate-monthly-invoices", 50},
		{"charge-card-order-1002", 90},
		{"refund-order-0999", 80},
	}
	deliveries := int64(len(queued) + maxRetries) // every job once, the broken one retried
	done := make(chan struct{})
	var handled atomic.Int64
	err = c.Register(jobs, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		n := handled.Add(1)
		if n == deliveries {
			defer close(done)
		}
		if m.ID == "charge-card-order-1002" {
			say("#%d priority %3d  %-26s attempt %d FAILED: %v", n, m.Priority, m.ID, m.Attempt, errGatewayDown)
			// Rolled back: retried in 200 ms (the gateway may be back), below
			// the fresh jobs, or dead after the last attempt. The error stays
			// its last error.
			return consumer.RetryAfter(200*time.Millisecond, errGatewayDown)
		}
		say("#%d priority %3d  %-26s attempt %d done", n, m.Priority, m.ID, m.Attempt)
		return nil
	}), consumer.WithConcurrency(1), consumer.WithMaxRetries(maxRetries))
	if err != nil {
		return err
	}

	// Queue every job before the worker starts, so the whole backlog is
	// there to be ordered.
	p := c.Producer()
	for _, j := range queued {
		// The job name is the key: queueing a job twice while it waits
		// keeps one copy.
		if _, err := p.SendPriority(ctx, jobs, []byte(j.name), j.priority, producer.WithKey(j.name)); err != nil {
			return err
		}
	}
	say("queued %d jobs; starting one worker", len(queued))
	if err := c.Start(ctx); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("only %d of %d deliveries after 30s", handled.Load(), deliveries)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := closeClient(); err != nil {
		return err
	}

	// The dead queue keeps the job and why it failed, until someone
	// requeues it (Inspector.Requeue, `rmqctl requeue`) or deletes it.
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(prefix))
	dead, err := insp.Dead(ctx, jobs)
	if err != nil {
		return err
	}
	for _, d := range dead {
		say("dead: %s after %d attempts, last error %q", d.ID, d.Attempts, d.LastError)
	}
	if len(dead) != 1 || dead[0].ID != "charge-card-order-1002" {
		return fmt.Errorf("dead queue holds %d jobs, want charge-card-order-1002 only", len(dead))
	}
	// This example deletes it, so that the next run starts clean.
	_, err = insp.DeleteDead(ctx, jobs, dead[0].ID)
	return err
}

// redisOptions reads the Redis to use from REDIS_URL: a URL
// (redis://[[user]:password@]host:port[/db], rediss:// for TLS) or a bare
// host:port. REDIS_ADDR is its older name, still read when REDIS_URL is
// not set. Default: 127.0.0.1:6379.
func redisOptions(getenv func(string) string) (*redis.Options, error) {
	url := getenv("REDIS_URL")
	if url == "" {
		url = getenv("REDIS_ADDR")
	}
	if url == "" {
		url = "127.0.0.1:6379"
	}
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	return opts, nil
}
