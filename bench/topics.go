package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The topics case (-cases topics): what a client costs by the
// number of topics it consumes rather than by its work. For each N of
// -topics, one rmq.Client registers N FixedTime topics of -slots slots with
// concurrency topicConcurrency each and is started; it idles while the
// process CPU and Redis's commands are counted; then N messages all due at
// one instant, one per topic, are sent and their firing lateness taken at
// full time precision. The baseline, in the same run, sends the same N
// messages into a single topic of a fresh client whose concurrency is the
// same total, capped at oneTopicMaxConcurrency. RMQ only; -types and
// -systems do not apply.

const (
	// topicConcurrency is consumer.WithConcurrency of each of the N topics.
	topicConcurrency = 4
	// oneTopicMaxConcurrency caps the baseline topic's concurrency (N×4).
	// The handlers are no-ops, so it only bounds how many messages one
	// fetch may take; 4,096 keeps that bound as it is for N ≤ 1,024 and
	// spares 40,000 handler slots at N = 10,000.
	oneTopicMaxConcurrency = 4096
	// topicsSettle passes between Start and the idle window, so the window
	// sees an idle client rather than the tail of the start-up (first
	// fetches of every slot, first sweeps).
	topicsSettle = time.Second
	// topicsSenders send a wave (single SendFixedTime calls).
	topicsSenders = 32
)

// topicsTrace, when set, names the file prefix of an execution trace of
// each wave (PREFIX-<n>-<kind>.trace), taken from just before the due
// instant until every message fired: where a wave's lateness goes.
var topicsTrace = flag.String("topics-trace", "", "write an execution trace of each wave of the topics case to PREFIX-<topics>-<wave>.trace")

// topicsProfile, when set, names the file prefix of a CPU profile of each
// wave (PREFIX-<n>-<kind>.pprof), sampled at 1 kHz: a wave lasts tens of
// milliseconds, a few samples at the default rate.
var topicsProfile = flag.String("topics-cpuprofile", "", "write a CPU profile (1 kHz) of each wave of the topics case to PREFIX-<topics>-<wave>.pprof")

// topicsMaxClients is the redis-server maxclients the bench asks for when
// the topics case runs: today every topic holds its own subscription
// connection, and Redis's default (10,000) would refuse the 10,000th.
func topicsMaxClients(o options) int {
	if !o.cases["topics"] || len(o.topicCounts) == 0 {
		return 0
	}
	return max(slices.Max(o.topicCounts)+1000, 10000)
}

// parseTopicCounts reads -topics: "1,100,1000".
func parseTopicCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-topics: bad count %q (want positive integers, e.g. 1,100,1000)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// classicCases reports whether anything besides the topics case runs (the
// asynq comparison and the per-type tables).
func classicCases(o options) bool {
	if o.waiting > 0 {
		return true
	}
	for c := range o.cases {
		if c != "topics" && c != "http" && c != "flow" && c != "life" && c != "flows" && c != "history" {
			return true
		}
	}
	return false
}

// waveResult is the firing lateness of one wave: n messages due at one
// instant (handler call − due instant, nanoseconds).
type waveResult struct {
	sent, fired  int
	extra, early int
	p50, p99     time.Duration
	max          time.Duration
	// margin is how long before the due instant the last send returned;
	// negative: the sends were not done in time and lateness includes that.
	margin time.Duration
	// clientCPU and redisCPU are the CPU time this process and Redis
	// spent from just before the due instant until every message fired.
	clientCPU, redisCPU time.Duration
	err                 string
}

// topicsResult is one N of the topics case.
type topicsResult struct {
	n        int
	register time.Duration // Register of all N topics
	start    time.Duration // Register + Start
	close    time.Duration
	// idle window
	idleCPU  float64 // process CPU time / wall time (1 = one core)
	idleCmds float64 // Redis commands per second, the bench's INFO excluded
	conns    int64   // Redis connected_clients during the idle window
	// memory and goroutines per idle topic, after GC
	heapPerTopic  float64
	stackPerTopic float64
	goroutines    float64
	wave          waveResult // one message per topic
	one           waveResult // the baseline: all N into one topic
	oneConc       int
	err           string // a phase that failed or ran out of time; what follows it is missing
}

// topics runs the topics case for every -topics count.
func (b *runner) topics(ctx context.Context, log *slog.Logger) error {
	for _, n := range b.o.topicCounts {
		if err := b.reset(ctx); err != nil {
			return err
		}
		progress("topics: %d topics on one client", n)
		r := b.topicsOnce(ctx, n, log)
		b.res.topics = append(b.res.topics, r)
		if r.err != "" {
			progress("topics: %d: %s", n, r.err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return b.reset(ctx)
}

func (b *runner) topicsOnce(ctx context.Context, n int, log *slog.Logger) (r topicsResult) {
	r = topicsResult{n: n, oneConc: min(n*topicConcurrency, oneTopicMaxConcurrency)}
	limit := b.o.topicsTimeout
	ts := make([]topic.Topic, n)
	for i := range ts {
		ts[i] = topic.MustNew(fmt.Sprintf("tp%05d", i), topic.FixedTime, b.o.slots)
	}
	heap0, stack0, g0 := settledMemory()

	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		r.err = "new client: " + err.Error()
		return r
	}
	rec := newLatRecorder(n)
	listener := consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		rec.recordDue(m.DueAt)
		return nil
	})
	rcpu0, cpu0 := b.redisCPU(ctx), processCPU()
	stopProfile, err := startProfile(fmt.Sprintf("%d-start", n))
	if err != nil {
		r.err = "profile: " + err.Error()
		return r
	}
	began := time.Now()
	for _, t := range ts {
		if err := c.Register(t, listener, consumer.WithConcurrency(topicConcurrency)); err != nil {
			r.err = "register: " + err.Error()
			return r
		}
	}
	r.register = time.Since(began)
	// Every way out closes the client (at most once, within limit).
	defer func() { r.close = b.closeTopics(c, limit, &r) }()
	sctx, cancel := context.WithTimeout(ctx, limit)
	err = c.Start(sctx)
	cancel()
	r.start = time.Since(began)
	stopProfile()
	progress("topics: %d: register %v, start %v; client CPU %v, Redis CPU %v", n, r.register.Round(time.Millisecond/10), r.start.Round(time.Millisecond/10), (processCPU() - cpu0).Round(time.Millisecond/10), (b.redisCPU(ctx) - rcpu0).Round(time.Millisecond/10))
	if err != nil {
		r.err = phaseErr("start", err, limit)
		return r
	}
	progress("topics: %d: started in %v; idling %v", n, r.start.Round(time.Millisecond), topicsSettle+b.o.topicsIdle)

	if err := sleepCtx(ctx, topicsSettle); err != nil {
		r.err = err.Error()
		return r
	}
	cpu0, cmds0, _, err := b.idleSnapshot(ctx)
	if err != nil {
		r.err = "idle: " + err.Error()
		return r
	}
	w0 := time.Now()
	if err := sleepCtx(ctx, b.o.topicsIdle); err != nil {
		r.err = err.Error()
		return r
	}
	cpu1, cmds1, conns, err := b.idleSnapshot(ctx)
	if err != nil {
		r.err = "idle: " + err.Error()
		return r
	}
	wall := time.Since(w0).Seconds()
	r.idleCPU = (cpu1 - cpu0).Seconds() / wall
	r.idleCmds = float64(cmds1-cmds0-1) / wall // the first INFO counts, the second not yet
	r.conns = conns
	heap1, stack1, g1 := settledMemory()
	r.heapPerTopic = float64(int64(heap1)-int64(heap0)) / float64(n)
	r.stackPerTopic = float64(int64(stack1)-int64(stack0)) / float64(n)
	r.goroutines = float64(g1-g0) / float64(n)

	progress("topics: %d: wave of %d due at one instant, one per topic", n, n)
	r.wave = b.wave(ctx, c, rec, func(i int) topic.Topic { return ts[i] }, n, limit, fmt.Sprintf("%d-topics", n))
	r.close = b.closeTopics(c, limit, &r)
	if r.wave.err != "" {
		r.err = "wave: " + r.wave.err
		return r
	}

	// The baseline: the same wave into one topic, on a fresh client.
	if err := b.reset(ctx); err != nil {
		r.err = "reset: " + err.Error()
		return r
	}
	progress("topics: %d: the same wave into one topic (concurrency %d)", n, r.oneConc)
	r.one = b.oneTopicWave(ctx, n, r.oneConc, log, limit)
	if r.one.err != "" {
		r.err = "one-topic wave: " + r.one.err
	}
	return r
}

// closeTopics closes c within limit once (later calls return the first
// figure), noting a failure in r.
func (b *runner) closeTopics(c *rmq.Client, limit time.Duration, r *topicsResult) time.Duration {
	if r.close > 0 {
		return r.close
	}
	cctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	began := time.Now()
	if err := c.Close(cctx); err != nil && r.err == "" {
		r.err = phaseErr("close", err, limit)
	}
	return max(time.Since(began), time.Nanosecond)
}

func (b *runner) oneTopicWave(ctx context.Context, n, conc int, log *slog.Logger, limit time.Duration) waveResult {
	t := topic.MustNew("tpone", topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return waveResult{err: err.Error()}
	}
	rec := newLatRecorder(n)
	err = c.Register(t, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		rec.recordDue(m.DueAt)
		return nil
	}), consumer.WithConcurrency(conc))
	if err != nil {
		return waveResult{err: err.Error()}
	}
	var w waveResult
	sctx, cancel := context.WithTimeout(ctx, limit)
	err = c.Start(sctx)
	cancel()
	if err == nil {
		// As for the N topics: the wave meets a settled client.
		if err = sleepCtx(ctx, topicsSettle); err == nil {
			w = b.wave(ctx, c, rec, func(int) topic.Topic { return t }, n, limit, fmt.Sprintf("%d-one", n))
		}
	}
	if err != nil {
		w.err = phaseErr("start", err, limit)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), limit)
	defer ccancel()
	if cerr := c.Close(cctx); cerr != nil && w.err == "" {
		w.err = phaseErr("close", cerr, limit)
	}
	return w
}

// wave sends n messages due at one instant, message i into topicOf(i),
// from topicsSenders goroutines, and waits (at most limit past the due
// instant) for each to fire once. The instant leaves the sends time to
// finish: 1 s plus 0.3 ms a message.
func (b *runner) wave(ctx context.Context, c *rmq.Client, rec *latRecorder, topicOf func(i int) topic.Topic, n int, limit time.Duration, name string) waveResult {
	lead := time.Second + time.Duration(n)*300*time.Microsecond
	// Whole milliseconds: FixedTime due times are stored in ms, so
	// Message.DueAt is exactly this instant.
	due := time.UnixMilli(time.Now().Add(lead).UnixMilli())
	p := c.Producer()
	bufs := make([][]byte, topicsSenders)
	err := parallel(ctx, n, topicsSenders, func(w, i int) error {
		bufs[w] = makeBody(bufs[w], b.o.body, "w", i, due.UnixMilli())
		_, err := p.SendFixedTime(ctx, topicOf(i), bufs[w], due)
		return err
	})
	w := waveResult{sent: n, margin: time.Until(due)}
	if err != nil {
		w.err = "send: " + err.Error()
		return w
	}
	if *topicsTrace != "" {
		stop, err := traceFrom(ctx, due.Add(-20*time.Millisecond), *topicsTrace+"-"+name+".trace")
		if err != nil {
			w.err = "trace: " + err.Error()
			return w
		}
		defer stop()
	}
	_ = sleepCtx(ctx, time.Until(due.Add(-5*time.Millisecond)))
	stopProfile, err := startProfile(name)
	if err != nil {
		w.err = "profile: " + err.Error()
		return w
	}
	defer stopProfile()
	rcpu0, cpu0 := b.redisCPU(ctx), processCPU()
	timer := time.NewTimer(time.Until(due) + limit)
	defer timer.Stop()
	select {
	case <-rec.all:
	case <-ctx.Done():
		w.err = ctx.Err().Error()
		return w
	case <-timer.C:
	}
	w.clientCPU, w.redisCPU = processCPU()-cpu0, b.redisCPU(ctx)-rcpu0
	progress("topics: wave %s: client CPU %v, Redis CPU %v", name, w.clientCPU.Round(time.Millisecond/10), w.redisCPU.Round(time.Millisecond/10))
	time.Sleep(100 * time.Millisecond) // catch duplicate deliveries
	fired := min(int(rec.fired.Load()), n)
	w.fired, w.extra = fired, int(rec.extra.Load())
	if fired < n {
		w.err = fmt.Sprintf("only %d of %d fired within %v of the due instant", fired, n, limit)
	}
	got := slices.Clone(rec.lat[:fired])
	slices.Sort(got)
	// A message that never fired counts as infinitely late.
	pct := func(q float64) time.Duration {
		i := max(int(math.Ceil(q*float64(n)))-1, 0)
		if i >= fired {
			return time.Duration(math.MaxInt64)
		}
		return got[i]
	}
	w.p50, w.p99, w.max = pct(0.50), pct(0.99), pct(1)
	for _, d := range got {
		if d < 0 {
			w.early++
		}
	}
	return w
}

// startProfile starts a CPU profile into the -topics-cpuprofile file of
// name (none without the flag) and returns what stops it.
func startProfile(name string) (stop func(), err error) {
	if *topicsProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%s-%d.pprof", *topicsProfile, name, time.Now().Unix()))
	if err != nil {
		return nil, err
	}
	// Set before StartCPUProfile, the rate stands (the runtime warns
	// that it cannot set its default).
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// traceFrom starts an execution trace into file at the instant from and
// returns what stops it.
func traceFrom(ctx context.Context, from time.Time, file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, time.Until(from)); err != nil {
		f.Close()
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { trace.Stop(); f.Close() }, nil
}

// redisCPU returns Redis's CPU time (INFO cpu, user + sys), 0 when it
// cannot be read.
func (b *runner) redisCPU(ctx context.Context) time.Duration {
	info, err := b.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// idleSnapshot reads this process's CPU time and, in one INFO call,
// Redis's total_commands_processed and connected_clients.
func (b *runner) idleSnapshot(ctx context.Context) (cpu time.Duration, cmds, conns int64, err error) {
	info, err := b.admin.Info(ctx, "stats", "clients").Result()
	cpu = processCPU()
	if err != nil {
		return 0, 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "total_commands_processed":
			cmds, err = strconv.ParseInt(v, 10, 64)
			found++
		case "connected_clients":
			conns, err = strconv.ParseInt(v, 10, 64)
			found++
		}
		if err != nil {
			return 0, 0, 0, err
		}
	}
	if found != 2 {
		return 0, 0, 0, errors.New("INFO lacks total_commands_processed or connected_clients")
	}
	return cpu, cmds, conns, nil
}

// settledMemory collects garbage and returns HeapInuse, StackInuse and the
// number of goroutines.
func settledMemory() (heap, stack uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// phaseErr names the phase and says when it ran out of its time.
func phaseErr(phase string, err error, limit time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("%s: not done within %v (-topics-timeout)", phase, limit)
	}
	return phase + ": " + err.Error()
}
