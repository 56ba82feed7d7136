package scenario

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rmq-go/rmq/examples/internal/exampleredis"
)

// Func is one scenario.
type Func func(ctx context.Context, env Env) error

// Main is the main function of the example programs: it gets a Redis
// (REDIS_ADDR, else a throwaway redis-server), runs the scenarios one after
// another, each under its own fresh key prefix that it deletes afterwards,
// stops the throwaway server and exits 1 if anything failed.
func Main(name string, scenarios ...Func) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, name, scenarios)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: FAILED: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name string, scenarios []Func) error {
	logf := func(format string, args ...any) { fmt.Printf("-- "+format+"\n", args...) }
	rdb, cleanup, err := exampleredis.Open(ctx, logf)
	if err != nil {
		return err
	}
	defer cleanup()
	start := time.Now()
	for i, sc := range scenarios {
		if i > 0 {
			fmt.Println()
		}
		prefix := exampleredis.KeyPrefix(name)
		err := sc(ctx, Env{RDB: rdb, Prefix: prefix, Out: os.Stdout})
		// Clean up even after a failure (with a fresh context: ctx may be
		// the one that was interrupted).
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		derr := exampleredis.DeleteKeys(dctx, rdb, prefix)
		cancel()
		if err != nil {
			return err
		}
		if derr != nil {
			return fmt.Errorf("deleting keys %s:*: %w", prefix, derr)
		}
	}
	fmt.Printf("\n-- %s: OK (%d scenario(s) in %.1fs)\n", name, len(scenarios), time.Since(start).Seconds())
	return nil
}
