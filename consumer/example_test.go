package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// redisAddr is the address of the examples' redis-server, emptied for
// each example (TestMain stops it). In a program: the address of your
// Redis.
func redisAddr() string { return redistest.ExampleAddr() }

// outcomes is an rmq.Observer that passes on how each delivery ended, so
// that an example can wait for it. Observer methods must not block: the
// channel has room for every delivery of an example.
type outcomes struct {
	rmq.BaseObserver
	ch chan string
}

func newOutcomes() outcomes { return outcomes{ch: make(chan string, 100)} }

func (o outcomes) Finished(m *consumer.Message, _ time.Duration, outcome consumer.Outcome, err error) {
	o.ch <- fmt.Sprintf("%s attempt %d: %v", m.ID, m.Attempt, outcome)
}

// A listener is a function of the message; returning nil acks it, an
// error retries it later (after the topic's backoff), a panic too.
func ExampleListenerFunc() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	signups := topic.MustNew("signups", topic.FixedTime, 8)
	done := make(chan struct{})
	welcome := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		defer close(done)
		fmt.Printf("welcome mail to %s (topic %s, attempt %d)\n", m.Body, m.Topic, m.Attempt)
		return nil
	})
	if err := c.Register(signups, welcome, consumer.WithConcurrency(4)); err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendFixedTime(ctx, signups, []byte("ann@example.com"), time.Now()); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// welcome mail to ann@example.com (topic signups, attempt 1)
}

// SkipRetry sends a message that can never succeed (a poison message) to
// the dead queue at once, whatever retries are left, with the error as its
// last error.
func ExampleSkipRetry() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	ends := newOutcomes()
	c, err := rmq.New(rdb, rmq.WithObserver(ends))
	if err != nil {
		panic(err)
	}
	orders := topic.MustNew("orders", topic.FixedTime, 8)
	err = c.Register(orders, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if m.Body[0] != '{' {
			return consumer.SkipRetry(fmt.Errorf("not JSON: %q", m.Body))
		}
		return nil
	}), consumer.WithMaxRetries(10))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendFixedTime(ctx, orders, []byte("<order/>"), time.Now(), producer.WithKey("order-1")); err != nil {
		panic(err)
	}
	fmt.Println(<-ends.ch)
	dead, err := c.Inspector().DeadMessage(ctx, orders, "order-1")
	if err != nil {
		panic(err)
	}
	fmt.Println("dead:", dead.ID, dead.LastError)
	// Output:
	// order-1 attempt 1: dead
	// dead: order-1 not JSON: "<order/>"
}

// RetryAfter retries a failed delivery after the delay the handler names
// (say, from a rate limit's Retry-After) instead of the topic's backoff.
// The attempt counts; the next delivery sees the error.
func ExampleRetryAfter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	webhooks := topic.MustNew("webhooks", topic.FixedTime, 8)
	done := make(chan struct{})
	err = c.Register(webhooks, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		fmt.Printf("attempt %d, last error %q\n", m.Attempt, m.LastError)
		if m.Attempt == 1 {
			return consumer.RetryAfter(200*time.Millisecond, errors.New("429 Too Many Requests"))
		}
		close(done)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendFixedTime(ctx, webhooks, []byte("POST /hook"), time.Now(), producer.WithKey("hook-1")); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// attempt 1, last error ""
	// attempt 2, last error "429 Too Many Requests"
}

// Snooze puts a message back for later without counting an attempt: the
// handler could not start on it yet (the export it needs is not ready).
func ExampleSnooze() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	ends := newOutcomes()
	c, err := rmq.New(rdb, rmq.WithObserver(ends))
	if err != nil {
		panic(err)
	}
	reports := topic.MustNew("reports", topic.FixedTime, 8)
	var ready atomic.Bool // the export
	err = c.Register(reports, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if !ready.Swap(true) { // ready by the next delivery
			return consumer.Snooze(200 * time.Millisecond)
		}
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendFixedTime(ctx, reports, []byte("monthly"), time.Now(), producer.WithKey("report-3")); err != nil {
		panic(err)
	}
	fmt.Println(<-ends.ch)
	fmt.Println(<-ends.ch)
	// Output:
	// report-3 attempt 1: snoozed
	// report-3 attempt 1: acked
}

// Past its retries a failing message moves to the dead queue: with
// WithMaxRetries(2) it is tried three times. WithRetryBackoff sets the
// wait between attempts (50 ms here).
func ExampleWithMaxRetries() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	ends := newOutcomes()
	c, err := rmq.New(rdb, rmq.WithObserver(ends))
	if err != nil {
		panic(err)
	}
	charges := topic.MustNew("charges", topic.Priority, 4)
	err = c.Register(charges, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		return errors.New("card declined")
	}), consumer.WithMaxRetries(2), consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendPriority(ctx, charges, []byte("charge 12.00"), 50, producer.WithKey("charge-1")); err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println(<-ends.ch)
	}
	// Output:
	// charge-1 attempt 1: retried
	// charge-1 attempt 2: retried
	// charge-1 attempt 3: dead
}

// A handler that panics does not bring the consumer down: the delivery is
// rolled back with a *PanicError (its value and stack) and retried.
func ExamplePanicError() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	obs := panics{values: make(chan any, 10)}
	c, err := rmq.New(rdb, rmq.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	jobs := topic.MustNew("jobs", topic.Priority, 4)
	lastError := make(chan string, 1)
	err = c.Register(jobs, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if m.Attempt == 1 {
			size := strings.Split(string(m.Body), ":")[1] // a bug: the body has no size
			_ = size
		}
		lastError <- m.LastError
		return nil
	}), consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendPriority(ctx, jobs, []byte("resize"), 50, producer.WithKey("job-1")); err != nil {
		panic(err)
	}
	fmt.Println("panicked:", <-obs.values)
	fmt.Printf("retried after %q\n", <-lastError)
	// Output:
	// panicked: runtime error: index out of range [1] with length 1
	// retried after "rmq: handler panic: runtime error: index out of range [1] with length 1"
}

// panics is an rmq.Observer that passes on the value of every panic a
// delivery ended with.
type panics struct {
	rmq.BaseObserver
	values chan any
}

func (o panics) Finished(m *consumer.Message, _ time.Duration, outcome consumer.Outcome, err error) {
	var pe *consumer.PanicError
	if errors.As(err, &pe) {
		o.values <- pe.Value
	}
}
