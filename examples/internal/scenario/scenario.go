// Package scenario holds the use cases the example programs show. Each one
// is a function so that examples/<name> runs it alone and examples/demo runs
// all of them in a row. A scenario checks its own outcome and returns an
// error when RMQ did not behave as promised.
package scenario

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
)

// Env is what a scenario runs against.
type Env struct {
	RDB    *redis.Client
	Prefix string    // key prefix of this run's topics (rmq.WithPrefix)
	Out    io.Writer // where the story is told
}

// closeTimeout bounds Client.Close: in-flight handlers may finish within
// it, the rest are rolled back.
const closeTimeout = 5 * time.Second

// newClient returns an rmq client on env's Redis and prefix that logs only
// warnings and errors, to stderr.
func newClient(env Env) (*rmq.Client, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return rmq.New(env.RDB, rmq.WithPrefix(env.Prefix), rmq.WithLogger(log))
}

// closeClient closes c with a deadline and reports a failure on top of err.
func closeClient(c *rmq.Client, err *error) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if cerr := c.Close(ctx); cerr != nil && *err == nil {
		*err = fmt.Errorf("close: %w", cerr)
	}
}

// clock prints lines stamped with the time since the scenario began. It is
// safe for concurrent use (handlers run on their own goroutines).
type clock struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func newClock(out io.Writer) *clock { return &clock{out: out, start: time.Now()} }

// since formats t relative to the start: "+1.234s".
func (c *clock) since(t time.Time) string {
	return fmt.Sprintf("+%.3fs", t.Sub(c.start).Seconds())
}

func (c *clock) say(format string, args ...any) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, "  [%s] %s\n", c.since(now), fmt.Sprintf(format, args...))
}

// sleepUntil waits until offset d after the start, or until ctx is done.
func (c *clock) sleepUntil(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(time.Until(c.start.Add(d)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitFor polls cond every 10 ms until it holds, ctx is done or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// ms formats a duration in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
}
