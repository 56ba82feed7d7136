// Command demo is the main demo of RMQ for Go: it builds the three use-case
// examples and runs them, one after another, against one throwaway
// redis-server, and exits 0 when every one of them behaved as promised:
//
//   - ordertimeout (FixedTime): an unpaid order is cancelled by its
//     timeout; paying removes the timeout message;
//   - pricemerge (RangeMerge): bursts of price changes per SKU collapse into
//     one delivery per SKU carrying the latest price;
//   - priorityjobs (Priority): one worker, highest priority first; a failing
//     job is retried after the fresh ones and ends in the dead queue.
//
// The examples themselves are plain programs a user can copy: they import
// only the library and go-redis and talk to REDIS_ADDR. The demo is this
// repository's own harness around them, so it may use the internal
// redis-server helper the tests use (installing redis-server with apt-get
// when it is missing).
//
//	go run ./examples/demo                           # throwaway redis-server
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/demo # your Redis instead
//	scripts/demo.sh                                  # the same as the first
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rmq-go/rmq/internal/redisserver"
)

// examples are run in this order.
var examples = []string{"ordertimeout", "pricemerge", "priorityjobs"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Getenv("REDIS_ADDR"), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// run runs the examples against addr, or against a throwaway redis-server
// when addr is empty.
func run(ctx context.Context, addr string, stdout, stderr io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(stdout, "-- "+format+"\n", args...) }
	start := time.Now()
	if addr == "" {
		if err := redisserver.EnsureInstalled(ctx, logf); err != nil {
			return fmt.Errorf("no REDIS_ADDR and cannot run a local redis-server: %w", err)
		}
		srv, err := redisserver.Start(ctx, redisserver.Config{})
		if err != nil {
			return err
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stopping redis-server: %w", serr)
			}
			logf("stopped the throwaway redis-server")
		}()
		addr = srv.Addr()
		logf("started a throwaway redis-server on %s (set REDIS_ADDR to use yours)", addr)
	}

	// Build all three at once (one go command, shared build cache), then
	// run the binaries: what runs is exactly what `go run ./examples/X`
	// would run.
	bin, err := os.MkdirTemp("", "rmq-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, name := range examples {
		args = append(args, "github.com/rmq-go/rmq/examples/"+name)
	}
	logf("building the examples: go %v", args)
	build := exec.CommandContext(ctx, "go", args...)
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the examples: %w", err)
	}

	for _, name := range examples {
		fmt.Fprintf(stdout, "\n== %s (REDIS_ADDR=%s go run ./examples/%s)\n", name, addr, name)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name))
		cmd.Env = append(os.Environ(), "REDIS_ADDR="+addr)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	fmt.Fprintf(stdout, "\n-- demo: OK (%d examples in %.1fs)\n", len(examples), time.Since(start).Seconds())
	return nil
}
