// Command rmqbench is a load generator for RMQ for Go. For each message
// type it measures:
//
//   - produce: single Send… calls (SendRangeMerge, SendPriority,
//     SendFixedTime) from -producers goroutines, -n messages in all;
//   - batch: SendBatch calls of -batch-size messages from -batch-producers
//     goroutines, -n messages in all;
//   - consume: how fast one Client with -concurrency handlers (and a
//     -prefetch, consumer.WithPrefetch) and a no-op
//     listener drains that backlog of -n messages, acks included (the clock
//     stops when store and prepare are both empty);
//   - memory: Redis memory per waiting message (INFO memory used_memory
//     growth, client buffers excluded) over -mem-n far-future messages;
//   - lateness (RangeMerge and FixedTime only): for each -rate, messages
//     scheduled to come due at that steady rate for -duration, each sent
//     -lead before it is due; lateness = time the handler is called −
//     Message.DueAt. It reports p50, p99 and max, and the number of early
//     firings (negative lateness), which must be 0. With -waiting N every
//     rate runs again with N far-future messages waiting in the same topic.
//
// Every run works under a fresh key prefix (rmq.WithPrefix) and deletes its
// keys at the end. Without -redis it starts a throwaway redis-server on a
// free loopback port (installing it with apt-get if it is missing).
//
//	go run ./cmd/rmqbench                       # all three types, ≈ 40 s
//	go run ./cmd/rmqbench -type fixedtime -rate 20000 -duration 5s
//	go run ./cmd/rmqbench -type fixedtime -waiting 10000000   # ≈ 4 GB of Redis memory
//	go run ./cmd/rmqbench -redis 127.0.0.1:6379 -json
//
// It exits 1 when a message was lost, handled twice, or fired early.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/redisserver"
	"github.com/rmq-go/rmq/topic"
)

type options struct {
	redisAddr   string
	types       []topic.Type
	n           int
	producers   int
	concurrency int
	prefetch    int
	body        int
	slots       int
	duration    time.Duration
	rates       []int
	lead        time.Duration
	batchSize   int
	batchProd   int
	memN        int
	waiting     int
	json        bool
	verbose     bool
}

func parseFlags() (options, error) {
	var o options
	var typ, rates string
	flag.StringVar(&o.redisAddr, "redis", "", "Redis address host:port (default: start a throwaway local redis-server)")
	flag.StringVar(&typ, "type", "all", "message type: rangemerge, priority, fixedtime or all")
	flag.IntVar(&o.n, "n", 20000, "messages per type for the produce and consume phases")
	flag.IntVar(&o.producers, "producers", 32, "goroutines calling Send… concurrently")
	flag.IntVar(&o.concurrency, "concurrency", 32, "handlers of the consuming Client (consumer.WithConcurrency)")
	flag.IntVar(&o.prefetch, "prefetch", 0, "messages the consume phase fetches beyond the free handlers (consumer.WithPrefetch; 2048 drains a backlog about 1.3 times as fast)")
	flag.IntVar(&o.body, "body", 128, "message body size in bytes")
	flag.IntVar(&o.slots, "slots", 16, "slots per topic (a power of two)")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "length of the lateness phase per time-based type (0 skips it)")
	flag.StringVar(&rates, "rate", "1000,20000", "messages per second coming due in the lateness phase; a comma-separated list runs one phase each")
	flag.IntVar(&o.batchSize, "batch-size", 1000, "messages per SendBatch call in the batch phase (0 skips it)")
	flag.IntVar(&o.batchProd, "batch-producers", 4, "goroutines calling SendBatch concurrently")
	flag.IntVar(&o.memN, "mem-n", 200000, "far-future messages over which memory per waiting message is measured (0 skips it)")
	flag.IntVar(&o.waiting, "waiting", 0, "run every lateness phase again with this many far-future messages waiting in the same topic")
	flag.DurationVar(&o.lead, "lead", time.Second, "how long before its due time each lateness-phase message is sent")
	flag.BoolVar(&o.json, "json", false, "print the results as JSON on stdout (progress still goes to stderr)")
	flag.BoolVar(&o.verbose, "v", false, "log the library's info messages to stderr (default: warnings only)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: rmqbench [flags]\n\nProduce, consume and firing-lateness figures for each RMQ message type.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	for _, s := range strings.Split(rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || r < 1 {
			return o, fmt.Errorf("-rate: %q is not a rate of at least 1 msg/s", s)
		}
		o.rates = append(o.rates, r)
	}
	if typ == "all" {
		o.types = []topic.Type{topic.RangeMerge, topic.Priority, topic.FixedTime}
	} else {
		for _, s := range strings.Split(typ, ",") {
			t, err := topic.ParseType(strings.TrimSpace(s))
			if err != nil {
				return o, fmt.Errorf("-type: %w", err)
			}
			o.types = append(o.types, t)
		}
	}
	switch {
	case o.n < 1:
		return o, errors.New("-n must be at least 1")
	case o.producers < 1:
		return o, errors.New("-producers must be at least 1")
	case o.concurrency < 1:
		return o, errors.New("-concurrency must be at least 1")
	case o.prefetch < 0:
		return o, errors.New("-prefetch must be at least 0")
	case o.body < 1:
		return o, errors.New("-body must be at least 1")
	case o.duration < 0:
		return o, errors.New("-duration must not be negative")
	case o.batchSize < 0 || o.batchProd < 1:
		return o, errors.New("-batch-size must not be negative and -batch-producers must be at least 1")
	case o.memN < 0 || o.waiting < 0:
		return o, errors.New("-mem-n and -waiting must not be negative")
	case o.lead < 10*time.Millisecond:
		return o, errors.New("-lead must be at least 10ms")
	}
	if _, err := topic.New("x", topic.FixedTime, o.slots); err != nil {
		return o, fmt.Errorf("-slots: %w", err)
	}
	return o, nil
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rmqbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rmqbench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rmqbench: "+format+"\n", args...)
}

func run(ctx context.Context, o options) (err error) {
	env := environment{Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU()}
	addr := o.redisAddr
	if addr == "" {
		if err := redisserver.EnsureInstalled(ctx, progress); err != nil {
			return err
		}
		srv, err := redisserver.Start(ctx, redisserver.Config{})
		if err != nil {
			return err
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stopping redis-server: %w", serr)
			}
		}()
		addr = srv.Addr()
		env.Throwaway = true
		progress("started a throwaway redis-server on %s", addr)
	}
	env.Redis = addr
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(o.producers, o.concurrency) + 16})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", addr, err)
	}
	env.RedisVersion = redisVersion(ctx, rdb)

	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	b := &bench{
		o:      o,
		rdb:    rdb,
		prefix: "rmqbench-" + strings.ToLower(fmt.Sprintf("%x", time.Now().UnixNano())),
		log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	progress("key prefix %s; redis %s at %s", b.prefix, env.RedisVersion, addr)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, derr := deleteKeys(cctx, rdb, b.prefix)
		if derr != nil && err == nil {
			err = fmt.Errorf("deleting keys %s:*: %w", b.prefix, derr)
		}
		progress("deleted %d key(s) under %s:", n, b.prefix)
	}()

	progress("warming up")
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	rep := report{Env: env, Config: configOf(o)}
	for _, t := range o.types {
		r, err := b.runType(ctx, t)
		rep.Results = append(rep.Results, r)
		if err != nil {
			return err
		}
	}
	if o.json {
		if err := printJSON(os.Stdout, rep); err != nil {
			return err
		}
	} else {
		printTable(os.Stdout, rep)
	}
	var problems []string
	for _, r := range rep.Results {
		problems = append(problems, r.Problems...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("FAILED: %s", strings.Join(problems, "; "))
	}
	return nil
}

func redisVersion(ctx context.Context, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// deleteKeys removes every key under prefix and returns how many it found.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) (int, error) {
	var errs []error
	n := 0
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			errs = append(errs, rdb.Unlink(ctx, batch...).Err())
			n += len(batch)
			batch = batch[:0]
		}
	}
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			flush()
		}
	}
	flush()
	errs = append(errs, iter.Err())
	return n, errors.Join(errs...)
}
