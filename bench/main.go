// Command bench is the benchmark driver of RMQ for Go. It runs the same cases
// against hibiken/asynq, BullMQ on Node (bullmq.go; left out with a
// warning when it cannot be installed) and RMQ for Go in one run, against one throwaway
// local redis-server that it starts on a free loopback port (no persistence;
// installed with apt-get first if it is missing) and stops, and prints one
// table with the ratios, the machine and the command line.
//
// Cases (128-byte bodies; asynq tasks against RMQ FixedTime messages, the
// one type asynq has; -types adds RMQ's other message types and a table per
// type):
//
//   - produce with single calls from 1 and from 32 goroutines (asynq
//     Client.Enqueue, RMQ SendFixedTime);
//   - produce with the batch API (RMQ SendBatch; asynq has none);
//   - consume+ack a backlog with a no-op handler and 32 workers, with
//     each library's defaults, and for RMQ again with
//     consumer.WithPrefetch(-prefetch);
//   - firing lateness (handler call − due time) p50/p99/max and early
//     firings at 1,000 and 20,000 msgs/s coming due (asynq ProcessAt);
//   - optionally (-waiting N, or -huge for 10 million) the same lateness
//     with N far-future messages waiting in the same queue;
//   - Redis memory per waiting message (INFO memory delta / count);
//   - only with -cases topics (RMQ only, topics.go): N topics on one
//     client, its start, idle cost and memory per topic, and a wave due at
//     one instant across N topics against the same wave inside one;
//   - only with -cases history (RMQ only, history.go): produce and
//     consume with the per-minute history and worker record on (the
//     default) and off (rmq.WithHistory(0)), side by side.
//
// Throughput and lateness figures are medians of -runs runs; the systems
// alternate within each case. Per-message costs (Redis commands, round
// trips, bytes on the wire, client and Redis CPU) are measured in the same
// timed sections. -json prints all of it for machines instead of tables.
// The exit status is 1 when RMQ lost a message, delivered one twice or
// fired one early.
//
//	cd bench && go run .              # all three systems
//	cd bench && go run . -systems asynq,rmq                # ≈ 2 minutes
//	cd bench && go run . -huge        # + 10M waiting messages (RMQ)
//	cd bench && go run . -systems rmq -types all -runs 1   # every RMQ type
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/topic"
)

type options struct {
	runs       int
	n          int
	batchN     int
	batch      int
	batchG     int
	producers  int
	workers    int
	prefetch   int
	body       int
	slots      int
	late       []latSpec
	lead       time.Duration
	memN       int
	waiting    int // far-future messages of the -waiting lateness cases; 0: none
	hugeAsynq  bool
	asynqCheck time.Duration
	systems    map[string]bool
	types      []topic.Type // RMQ message types, FixedTime (the compared one) first
	cases      map[string]bool
	json       bool
	verbose    bool
	cpuProfile string
	resp       int
	cmdStats   bool
	rawArgs    []string
	// systemsGiven: -systems was on the command line (a BullMQ that cannot
	// be readied is then an error, not a warning).
	systemsGiven bool
	// the topics case (topics.go), run only when -cases names it
	topicCounts   []int
	topicsTimeout time.Duration
	topicsIdle    time.Duration
	httpDur       time.Duration // the http case (http.go): length of each wrk phase
}

type latSpec struct {
	rate     int
	duration time.Duration
}

var allCases = []string{"produce1", "produce32", "batch", "consume", "consumepf", "lateness", "memory"}

func parseFlags() (options, error) {
	var o options
	var late, systems, types, cases, topicCounts string
	var huge bool
	flag.IntVar(&o.runs, "runs", 3, "runs of each throughput and lateness case; the table shows medians")
	flag.IntVar(&o.n, "n", 20000, "messages per single-send produce case and per consume backlog")
	flag.IntVar(&o.batchN, "batch-n", 200000, "messages in the batch produce case")
	flag.IntVar(&o.batch, "batch", 1000, "messages per SendBatch call")
	flag.IntVar(&o.batchG, "batch-goroutines", 4, "goroutines calling SendBatch")
	flag.IntVar(&o.producers, "producers", 32, "goroutines of the 32-goroutine produce case and of the lateness senders")
	flag.IntVar(&o.workers, "workers", 32, "handlers (asynq Concurrency, RMQ consumer.WithConcurrency)")
	flag.IntVar(&o.prefetch, "prefetch", 2048, "RMQ consumer.WithPrefetch of the consumepf case: messages fetched beyond the free handlers")
	flag.IntVar(&o.body, "body", 128, "body bytes")
	flag.IntVar(&o.slots, "slots", 16, "slots of each RMQ topic")
	flag.StringVar(&late, "late", "1000:2s,20000:1s", "lateness cases, rate:duration (msgs/s coming due, for how long)")
	flag.DurationVar(&o.lead, "lead", time.Second, "each lateness message is sent this long before it is due")
	flag.IntVar(&o.memN, "mem-n", 200000, "waiting messages for the memory case (the issue's figure is for 1000000)")
	flag.IntVar(&o.waiting, "waiting", 0, "also measure lateness with this many far-future messages waiting in the same queue (RMQ loads them with SendBatch)")
	flag.BoolVar(&huge, "huge", false, "-waiting 10000000 (needs ~3 GB)")
	flag.BoolVar(&o.hugeAsynq, "huge-asynq", false, "run the -waiting cases for asynq too (one Enqueue per task: ~10 min and ~7 GB for 10M)")
	flag.DurationVar(&o.asynqCheck, "asynq-check", 0, "asynq TaskCheckInterval and DelayedTaskCheckInterval (0: asynq's defaults, 1s and 5s)")
	flag.StringVar(&systems, "systems", "asynq,bullmq,rmq", "systems to run: asynq, bullmq (BullMQ on Node, installed with apt-get and npm when missing; left out with a warning when that fails and -systems was not given) and rmq")
	flag.StringVar(&types, "types", "fixedtime", "RMQ message types: rangemerge, priority, fixedtime, or all; asynq is compared with fixedtime, and more than one type adds a table per type")
	flag.StringVar(&cases, "cases", strings.Join(allCases, ","), "cases to run")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of each timed throughput section to PREFIX-<case>-<system>-r<run>.pprof")
	flag.IntVar(&o.resp, "resp", 3, "RESP version of the go-redis client (3 is go-redis's default; 2 skips its push-notification checks)")
	flag.BoolVar(&o.cmdStats, "cmdstats", false, "also print INFO commandstats per message for each throughput case")
	flag.BoolVar(&o.json, "json", false, "print the results as JSON on stdout instead of tables (progress still goes to stderr)")
	flag.StringVar(&topicCounts, "topics", "1,100,1000", "topic counts of the topics case (-cases topics; not run by default): N topics on one client")
	flag.DurationVar(&o.httpDur, "http-d", 8*time.Second, "length of each wrk phase of the http case (-cases http; not run by default): rmqd over HTTP, lmstfy too with LMSTFY_BIN (whole seconds)")
	flag.DurationVar(&o.topicsIdle, "topics-idle", 5*time.Second, "the idle window of the topics case (client CPU and Redis commands/s)")
	flag.DurationVar(&o.topicsTimeout, "topics-timeout", 2*time.Minute, "the most each phase of the topics case may take (start, a wave's firing, close)")
	flag.BoolVar(&o.verbose, "v", false, "log RMQ warnings and asynq errors to stderr")
	flag.Parse()
	o.rawArgs = os.Args[1:]
	flag.Visit(func(f *flag.Flag) { o.systemsGiven = o.systemsGiven || f.Name == "systems" })
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	o.systems, o.cases = map[string]bool{}, map[string]bool{}
	for _, s := range strings.Split(systems, ",") {
		if s = strings.TrimSpace(s); s != "asynq" && s != "bullmq" && s != "rmq" {
			return o, fmt.Errorf("-systems: unknown %q (asynq, bullmq, rmq)", s)
		}
		o.systems[s] = true
	}
	if types == "all" {
		types = "fixedtime,rangemerge,priority"
	}
	for _, s := range strings.Split(types, ",") {
		t, err := topic.ParseType(strings.TrimSpace(s))
		if err != nil {
			return o, fmt.Errorf("-types: %w", err)
		}
		if !slices.Contains(o.types, t) {
			o.types = append(o.types, t)
		}
	}
	// FixedTime first: it is the type compared with asynq.
	slices.SortStableFunc(o.types, func(a, b topic.Type) int {
		return cmp.Compare(b2i(a != topic.FixedTime), b2i(b != topic.FixedTime))
	})
	if huge && o.waiting == 0 {
		o.waiting = 10_000_000
	}
	for _, c := range strings.Split(cases, ",") {
		c = strings.TrimSpace(c)
		known := c == "topics" || c == "http" || c == "flow" || c == "life" || c == "flows" || c == "history" // not in allCases: not run by default
		for _, k := range allCases {
			known = known || k == c
		}
		if !known {
			return o, fmt.Errorf("-cases: unknown %q (%s, topics, http, flow, life, flows, history)", c, strings.Join(allCases, ", "))
		}
		o.cases[c] = true
	}
	counts, err := parseTopicCounts(topicCounts)
	if err != nil {
		return o, err
	}
	o.topicCounts = counts
	for _, spec := range strings.Split(late, ",") {
		r, d, ok := strings.Cut(strings.TrimSpace(spec), ":")
		rate, err1 := strconv.Atoi(r)
		dur, err2 := time.ParseDuration(d)
		if !ok || err1 != nil || err2 != nil || rate < 1 || dur <= 0 {
			return o, fmt.Errorf("-late: bad %q (want rate:duration, e.g. 1000:2s)", spec)
		}
		o.late = append(o.late, latSpec{rate, dur})
	}
	switch {
	case o.resp != 2 && o.resp != 3:
		return o, errors.New("-resp must be 2 or 3")
	case o.topicsIdle <= 0 || o.topicsTimeout <= 0:
		return o, errors.New("-topics-idle and -topics-timeout must be positive")
	case o.runs < 1, o.n < 1, o.batchN < 1, o.batch < 1, o.batchG < 1, o.producers < 1, o.workers < 1, o.body < 32, o.waiting < 0, o.memN < 0, o.httpDur < time.Second:
		return o, errors.New("counts must be positive (-body at least 32)")
	}
	if _, err := topic.New("x", topic.FixedTime, o.slots); err != nil {
		return o, fmt.Errorf("-slots: %w", err)
	}
	return o, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func main() {
	if role := os.Getenv(lifeWorkerEnv); role != "" {
		os.Exit(runLifeWorker(role)) // the life case's consumer in another process
	}
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(ctx context.Context, o options) (err error) {
	began := time.Now()
	if err := redisserver.EnsureInstalled(ctx, progress); err != nil {
		return err
	}
	var srvArgs []string
	if mc := topicsMaxClients(o); mc > 0 {
		srvArgs = []string{"--maxclients", strconv.Itoa(mc)}
	}
	srv, err := redisserver.Start(ctx, redisserver.Config{ExtraArgs: srvArgs})
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping redis-server: %w", serr)
		}
	}()
	addr := srv.Addr()
	progress("started redis-server on %s", addr)

	cnt := &counters{}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, Protocol: o.resp, Dialer: countingDialer(cnt)})
	defer rdb.Close()
	rdb.AddHook(countingHook{cnt})
	// The admin client reads INFO and flushes: FLUSHALL of 10M messages
	// takes longer than go-redis's default 3 s read timeout.
	admin := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 5 * time.Minute, WriteTimeout: time.Minute})
	defer admin.Close()
	if err := admin.Ping(ctx).Err(); err != nil {
		return err
	}

	level := slog.LevelError + 1
	if o.verbose {
		level = slog.LevelWarn
	}
	s := settings{body: o.body, producers: o.producers, workers: o.workers}
	env := readEnv(ctx, admin, addr)
	asys := &asynqSys{rdb: rdb, admin: admin, s: s, checkInterval: o.asynqCheck, version: env.asynqVersion}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var systems []system
	if o.systems["asynq"] {
		systems = append(systems, asys)
	}
	if o.systems["bullmq"] && classicCases(o) {
		bsys, err := newBullSys(ctx, addr, admin, s, o.verbose, true)
		switch {
		case err != nil && o.systemsGiven:
			return err
		case err != nil:
			// By default BullMQ runs when it can be installed: an
			// offline machine still measures the other two.
			progress("bullmq: left out of this run (-systems asynq,rmq to leave it out quietly): %v", err)
		default:
			env.bullmq = bsys.name() + " on Node " + bsys.nodeVersion
			systems = append(systems, bsys)
		}
	}
	if o.systems["rmq"] {
		for _, t := range o.types {
			systems = append(systems, &rmqSys{rdb: rdb, admin: admin, s: s, typ: t, slots: o.slots, log: log})
		}
	}
	b := &runner{o: o, rdb: rdb, admin: admin, cnt: cnt, res: newResults()}
	if classicCases(o) {
		err = b.all(ctx, systems)
	}
	if err == nil && o.cases["topics"] {
		err = b.topics(ctx, log)
	}
	if err == nil && o.cases["http"] {
		err = b.httpCase(ctx)
	}
	if err == nil && o.cases["flow"] {
		err = b.flow(ctx, log)
	}
	if err == nil && o.cases["life"] {
		err = b.life(ctx, log)
	}
	if err == nil && o.cases["flows"] {
		err = b.flows(ctx, log)
	}
	if err == nil && o.cases["history"] {
		err = b.history(ctx, log)
	}
	env.elapsed = time.Since(began)
	env.loadAfter = loadAvg()
	if o.json {
		if jerr := printJSON(os.Stdout, o, env, systems, b.res, err); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		if err != nil {
			// Print what was measured before the failure.
			fmt.Fprintln(os.Stdout, "INCOMPLETE: bench stopped early:", err)
		}
		switch {
		case classicCases(o):
			printReport(os.Stdout, o, env, systems, b.res)
			printHTTP(os.Stdout, o, b.res)
		case o.cases["topics"]:
			printTopicsReport(os.Stdout, o, env, b.res)
			printHTTP(os.Stdout, o, b.res)
		case o.cases["flow"]:
			printFlowReport(os.Stdout, o, env, b.res)
		case o.cases["life"]:
			printLifeReport(os.Stdout, o, env, b.res)
		case o.cases["flows"]:
			printFlowsReport(os.Stdout, o, env, b.res)
		case o.cases["history"]:
			printHistoryReport(os.Stdout, o, env, b.res)
		default:
			printHTTPReport(os.Stdout, o, env, b.res)
		}
	}
	if err == nil {
		if p := slices.Concat(problems(systems, b.res), topicsProblems(b.res), httpProblems(b.res)); len(p) > 0 {
			err = fmt.Errorf("FAILED: %s", strings.Join(p, "; "))
		}
	}
	return err
}
