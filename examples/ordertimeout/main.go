// Command ordertimeout cancels orders that are not paid in time, with RMQ's
// FixedTime messages.
//
// Creating an order schedules a timeout message due PayWindow later, keyed
// by the order id. Paying the order removes that message (Producer.Remove),
// so it never fires; a timeout that does fire cancels the order.
//
// The story: three orders are created at once; order-1001 and order-1003
// are paid after half a second; order-1002 never is, and its timeout
// cancels it two seconds after it was created.
//
// It talks to the Redis that REDIS_URL names (default 127.0.0.1:6379):
//
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/ordertimeout
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
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// PayWindow is how long an order may stay unpaid.
const PayWindow = 2 * time.Second

// timeouts carries one timeout message per unpaid order. Eight slots let
// eight handlers of a fleet work on it side by side.
var timeouts = topic.MustNew("order-timeouts", topic.FixedTime, 8)

func main() {
	opts, err := redisOptions(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordertimeout:", err)
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
		fmt.Fprintln(os.Stderr, "ordertimeout:", err)
		os.Exit(1)
	}
}

// shop is the order database of the story. The timeout handler and the
// payment both change an order under its mutex, so whichever comes second
// sees what the first did.
type shop struct {
	mu     sync.Mutex
	status map[string]string // order id -> "unpaid", "paid", "cancelled"
}

// settle moves an unpaid order to status to and reports whether it did.
func (s *shop) settle(id, to string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status[id] != "unpaid" {
		return false
	}
	s.status[id] = to
	return true
}

func run(ctx context.Context, rdb *redis.Client, prefix string, out io.Writer) (err error) {
	start := time.Now()
	// log.Logger serialises its writes: handlers print from their own
	// goroutines.
	lg := log.New(out, "", 0)
	say := func(format string, args ...any) {
		lg.Printf("[+%.3fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	if err != nil {
		return err
	}
	defer func() {
		// Close waits for running handlers (up to its context) and for
		// their acks.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, c.Close(cctx))
	}()

	db := &shop{status: map[string]string{}}
	fired := make(chan string, 3)
	// The timeout handler: the message's id is the order id (WithKey below).
	err = c.Register(timeouts, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if db.settle(m.ID, "cancelled") {
			say("%s unpaid at its timeout -> CANCELLED (fired %v after its due time)", m.ID, time.Since(m.DueAt).Round(time.Millisecond))
		} else {
			// Only when a payment raced with this delivery: never cancel a
			// paid order.
			say("%s timeout fired, but the order is paid -> nothing to do", m.ID)
		}
		fired <- m.ID
		return nil // acked: the timeout is handled
	}))
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	p := c.Producer()

	orders := []string{"order-1001", "order-1002", "order-1003"}
	for _, id := range orders {
		db.mu.Lock()
		db.status[id] = "unpaid"
		db.mu.Unlock()
		// The order id is the message key, so Remove finds the message by
		// it (and a second send for the same order would move its timeout).
		due := time.Now().Add(PayWindow)
		if _, err := p.SendFixedTime(ctx, timeouts, []byte(id), due, producer.WithKey(id)); err != nil {
			return err
		}
		say("%s created, awaiting payment; timeout due at +%.3fs", id, due.Sub(start).Seconds())
	}

	if err := sleep(ctx, 500*time.Millisecond); err != nil {
		return err
	}
	for _, id := range []string{"order-1001", "order-1003"} {
		if !db.settle(id, "paid") {
			say("%s payment refused: the order was cancelled already", id)
			continue
		}
		removed, err := p.Remove(ctx, timeouts, id)
		if err != nil {
			return err
		}
		say("%s PAID -> its timeout message is removed (Remove: %v)", id, removed)
	}

	// Wait for order-1002's timeout. All three were due at the same moment,
	// so had the paid orders' timeouts not been removed they would fire now
	// too: a short grace period would catch them.
	var got []string
	select {
	case id := <-fired:
		got = append(got, id)
	case <-time.After(PayWindow + 5*time.Second):
		return errors.New("no timeout fired")
	case <-ctx.Done():
		return ctx.Err()
	}
	grace := time.After(300 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case id := <-fired:
			got = append(got, id)
		case <-grace:
			waiting = false
		}
	}
	say("result: timeouts fired for %v; paid orders %v", got, []string{"order-1001", "order-1003"})
	if len(got) != 1 || got[0] != "order-1002" {
		return fmt.Errorf("timeouts fired for %v, want only order-1002", got)
	}
	return nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
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
