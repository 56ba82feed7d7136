// Command demo is the main demo of RMQ for Go: it builds the use-case
// examples and runs them, one after another, against one throwaway
// redis-server, and exits 0 when every one of them behaved as promised:
//
//   - ordertimeout (FixedTime): an unpaid order is cancelled by its
//     timeout; paying removes the timeout message;
//   - pricemerge (RangeMerge): bursts of price changes per SKU collapse into
//     one delivery per SKU carrying the latest price;
//   - priorityjobs (Priority): one worker, highest priority first; a failing
//     job is retried after the fresh ones and ends in the dead queue;
//   - fleet (ZooKeeper mode), only when named: three workers consume every
//     order's events in order while one of them leaves; it also gets a
//     throwaway ZooKeeper.
//
// The examples themselves are plain programs a user can copy: they import
// only the library and go-redis and talk to the Redis that REDIS_URL names.
// The demo is this repository's own harness around them, so it may use the
// internal server helpers the tests use (installing redis-server, or
// ZooKeeper, with apt-get when it is missing).
//
//	go run ./examples/demo                                  # the first three; throwaway redis-server
//	go run ./examples/demo fleet                            # the fleet; throwaway ZooKeeper too
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/demo # your Redis instead (REDIS_ADDR: the older name)
//	scripts/demo.sh                                         # the same as the first
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
)

var (
	// known are the examples the demo can run, in the order it runs them.
	known = []string{"ordertimeout", "pricemerge", "priorityjobs", "fleet"}
	// byDefault are those it runs when none are named.
	byDefault = known[:3]
	// needZooKeeper are those that also talk to ZK_ADDR.
	needZooKeeper = map[string]bool{"fleet": true}
)

func main() {
	names, err := pick(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = os.Getenv("REDIS_ADDR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, servers{redisURL: redisURL, zkAddr: os.Getenv("ZK_ADDR")}, names, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// pick returns the examples to run, in the demo's order: those named, or
// the default ones.
func pick(args []string) ([]string, error) {
	if len(args) == 0 {
		return byDefault, nil
	}
	var names []string
	for _, n := range known {
		if slices.Contains(args, n) {
			names = append(names, n)
		}
	}
	for _, a := range args {
		if !slices.Contains(known, a) {
			return nil, fmt.Errorf("unknown example %q (known: %s)", a, strings.Join(known, ", "))
		}
	}
	return names, nil
}

// servers are the Redis and ZooKeeper the examples talk to; an empty one
// is a throwaway server the demo starts.
type servers struct {
	redisURL string // REDIS_URL for the examples: a URL or host:port
	zkAddr   string
}

// run runs the named examples against s, starting the servers s leaves
// empty (ZooKeeper only when an example needs it).
func run(ctx context.Context, s servers, names []string, stdout, stderr io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(stdout, "-- "+format+"\n", args...) }
	start := time.Now()
	if s.redisURL == "" {
		if err := redisserver.EnsureInstalled(ctx, logf); err != nil {
			return fmt.Errorf("no REDIS_URL and cannot run a local redis-server: %w", err)
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
		s.redisURL = "redis://" + srv.Addr()
		logf("started a throwaway redis-server on %s (set REDIS_URL to use yours)", srv.Addr())
	}
	if s.zkAddr == "" && slices.ContainsFunc(names, func(n string) bool { return needZooKeeper[n] }) {
		if err := zkserver.EnsureInstalled(ctx, logf); err != nil {
			return fmt.Errorf("no ZK_ADDR and cannot run a local ZooKeeper: %w", err)
		}
		// Tick 200 ms: the server grants session timeouts of 0.4..4 s, so
		// a departed worker's slots move within seconds.
		srv, err := zkserver.Start(ctx, zkserver.Config{TickTime: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stopping ZooKeeper: %w", serr)
			}
			logf("stopped the throwaway ZooKeeper")
		}()
		s.zkAddr = srv.Addr()
		logf("started a throwaway ZooKeeper on %s (set ZK_ADDR to use yours)", s.zkAddr)
	}

	// Build them at once (one go command, shared build cache), then run
	// the binaries: what runs is exactly what `go run ./examples/X` would
	// run.
	bin, err := os.MkdirTemp("", "rmq-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "github.com/rmq-go/rmq/examples/"+name)
	}
	logf("building the examples: go %v", args)
	build := exec.CommandContext(ctx, "go", args...)
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the examples: %w", err)
	}

	for _, name := range names {
		env := []string{"REDIS_URL=" + s.redisURL}
		shown := "REDIS_URL=" + redact(s.redisURL)
		if needZooKeeper[name] {
			env = append(env, "ZK_ADDR="+s.zkAddr)
			shown += " ZK_ADDR=" + s.zkAddr
		}
		fmt.Fprintf(stdout, "\n== %s (%s go run ./examples/%s)\n", name, shown, name)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name))
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	fmt.Fprintf(stdout, "\n-- demo: OK (%d examples in %.1fs)\n", len(names), time.Since(start).Seconds())
	return nil
}

// redact hides the password of a Redis URL the demo prints.
func redact(redisURL string) string {
	if u, err := url.Parse(redisURL); err == nil && u.User != nil {
		return u.Redacted()
	}
	return redisURL
}
