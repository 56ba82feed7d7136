package rmq_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The flow tests' worker role of this test binary (TestMain): a consumer of
// one topic with the limits and handler the environment says, printing
// "S <id> <group> <unix ns>" when a handler starts (with the time it left
// the store: fetchClock) and "E <id> <unix ns>" when it ends, so the
// parent sees the deliveries of the whole fleet.
const (
	flowWorkerRole   = "flow"
	flowTypeEnv      = "RMQ_FLOW_TYPE"    // topic type number
	flowSlotsEnv     = "RMQ_FLOW_SLOTS"   // slot amount
	flowLimitsEnv    = "RMQ_FLOW_LIMITS"  // rmq.Limits.String()
	flowConcEnv      = "RMQ_FLOW_CONC"    // consumer.WithConcurrency
	flowHoldEnv      = "RMQ_FLOW_HOLD"    // handler time (a duration); "forever" blocks
	flowPrepareEnv   = "RMQ_FLOW_PREPARE" // consumer.WithPrepareTimeout
	flowEventsPrefix = "S "
)

// flowOptions turn a Limits into consumer options.
func flowOptions(l rmq.Limits) []consumer.Option {
	var opts []consumer.Option
	if l.Rate > 0 {
		opts = append(opts, consumer.WithRateLimit(l.Rate, l.RatePer))
	}
	if l.Concurrency > 0 {
		opts = append(opts, consumer.WithGlobalConcurrency(l.Concurrency))
	}
	if l.GroupConcurrency > 0 {
		opts = append(opts, consumer.WithGroupConcurrency(l.GroupConcurrency))
	}
	if l.GroupRate > 0 {
		opts = append(opts, consumer.WithGroupRateLimit(l.GroupRate, l.GroupRatePer))
	}
	return opts
}

// runFlowWorker is the worker role (TestMain).
func runFlowWorker() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "flow worker:", err); return 2 }
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	clock := newFetchClock()
	rdb.AddHook(redistest.Observer{After: clock.after})
	typ, _ := strconv.Atoi(os.Getenv(flowTypeEnv))
	n, _ := strconv.Atoi(os.Getenv(flowSlotsEnv))
	tp, err := topic.New(os.Getenv(workerTopicEnv), topic.Type(typ), n)
	if err != nil {
		return fail(err)
	}
	limits, err := rmq.ParseLimits(os.Getenv(flowLimitsEnv))
	if err != nil {
		return fail(err)
	}
	conc, _ := strconv.Atoi(os.Getenv(flowConcEnv))
	hold := os.Getenv(flowHoldEnv)
	var holdFor time.Duration
	if hold != "forever" {
		if holdFor, err = time.ParseDuration(hold); err != nil {
			return fail(err)
		}
	}
	opts := append(flowOptions(limits), consumer.WithConcurrency(conc))
	if p := os.Getenv(flowPrepareEnv); p != "" {
		d, err := time.ParseDuration(p)
		if err != nil {
			return fail(err)
		}
		opts = append(opts, consumer.WithPrepareTimeout(d))
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(os.Getenv(workerPrefixEnv)), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	print := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, a...)
		out.Flush()
		mu.Unlock()
	}
	err = c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		print("S %s %s %d\n", m.ID, orDash(m.Group), clock.of(m.ID, m.FetchedAt).UnixNano())
		if hold == "forever" {
			select {}
		}
		// The handler's working time: the limits are checked on how the
		// holds overlap, so it times the behaviour under test.
		time.Sleep(holdFor)
		print("E %s %d\n", m.ID, time.Now().UnixNano())
		return nil
	}), opts...)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	print("READY\n")
	// Until the parent closes stdin (or kills the process).
	_, _ = io.Copy(io.Discard, os.Stdin)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_ = c.Close(cctx)
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// flowEvent is a handler's start or end, in any process of the fleet.
type flowEvent struct {
	start bool
	id    string
	group string
	at    time.Time
	proc  string
}

// flowLog gathers the fleet's events.
type flowLog struct {
	mu     sync.Mutex
	events []flowEvent
	starts map[string]int
	signal chan struct{}
	clock  *fetchClock // this process's fetches
}

func newFlowLog() *flowLog {
	return &flowLog{starts: map[string]int{}, signal: make(chan struct{}, 1), clock: newFetchClock()}
}

func (l *flowLog) add(ev flowEvent) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	if ev.start {
		l.starts[ev.id]++
	}
	l.mu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// snapshot returns the events so far, by time.
func (l *flowLog) snapshot() []flowEvent {
	l.mu.Lock()
	out := append([]flowEvent(nil), l.events...)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// distinct is how many different messages started.
func (l *flowLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}

// waitDistinct waits until n different messages started.
func (l *flowLog) waitDistinct(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for l.distinct() < n {
		select {
		case <-l.signal:
		case <-deadline.C:
			t.Fatalf("%d of %d messages started within %v", l.distinct(), n, within)
		}
	}
}

// listener records into l as proc, holding each message for hold (and
// then calling then, if not nil).
func (l *flowLog) listener(proc string, hold time.Duration, then func(m *consumer.Message) error) consumer.MessageListener {
	return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		// A start is when the delivery left the store (fetchClock).
		l.add(flowEvent{start: true, id: m.ID, group: m.Group, at: l.clock.of(m.ID, m.FetchedAt), proc: proc})
		if hold > 0 {
			// The handler's working time: the limits are checked on how
			// the holds overlap, so it times the behaviour under test.
			time.Sleep(hold)
		}
		var err error
		if then != nil {
			err = then(m)
		}
		l.add(flowEvent{id: m.ID, at: time.Now(), proc: proc})
		return err
	})
}

// flowWorker is a worker process of the fleet.
type flowWorker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startFlowWorker starts the worker role on e's Redis for tp, feeding log.
func startFlowWorker(t *testing.T, e *env, tp topic.Topic, l rmq.Limits, conc int, hold, prepare string, log *flowLog) *flowWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cluster := "0"
	if e.cl != nil {
		cluster = "1"
	}
	cmd.Env = append(os.Environ(), workerEnv+"="+flowWorkerRole, workerAddrEnv+"="+e.addrs(), workerClusterEnv+"="+cluster,
		workerPrefixEnv+"="+e.prefix, workerTopicEnv+"="+tp.Name(), flowTypeEnv+"="+strconv.Itoa(int(tp.Type())),
		flowSlotsEnv+"="+strconv.Itoa(tp.SlotAmount()), flowLimitsEnv+"="+l.String(), flowConcEnv+"="+strconv.Itoa(conc),
		flowHoldEnv+"="+hold, flowPrepareEnv+"="+prepare)
	cmd.Stderr = e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &flowWorker{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "READY":
				close(ready)
			case len(f) == 4 && f[0] == "S":
				ns, _ := strconv.ParseInt(f[3], 10, 64)
				g := f[2]
				if g == "-" {
					g = ""
				}
				log.add(flowEvent{start: true, id: f[1], group: g, at: time.Unix(0, ns), proc: "worker"})
			case len(f) == 3 && f[0] == "E":
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				log.add(flowEvent{id: f[1], at: time.Unix(0, ns), proc: "worker"})
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = w.stdin.Close()
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-w.done
		}
	})
	select {
	case <-ready:
	case <-w.done:
		t.Fatalf("flow worker ended before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatalf("flow worker not ready within 30s")
	}
	return w
}

// kill ends the worker with SIGKILL, holding what it holds.
func (w *flowWorker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// maxOverlap returns the most handlers running at once in events (a start
// counts until its end), and per key (group) the most at once of one key.
func maxOverlap(events []flowEvent, key func(flowEvent) string) (all int, byKey map[string]int) {
	running := map[string]string{} // id@proc -> key
	perKey := map[string]int{}
	byKey = map[string]int{}
	for _, ev := range events {
		h := ev.id + "@" + ev.proc
		if ev.start {
			k := key(ev)
			running[h] = k
			perKey[k]++
			byKey[k] = max(byKey[k], perKey[k])
			all = max(all, len(running))
			continue
		}
		if k, ok := running[h]; ok {
			perKey[k]--
			delete(running, h)
		}
	}
	return all, byKey
}

// maxInWindow returns the most starts within any window of length w.
func maxInWindow(events []flowEvent, w time.Duration) int {
	var starts []time.Time
	for _, ev := range events {
		if ev.start {
			starts = append(starts, ev.at)
		}
	}
	best, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// fetchClock is a go-redis hook that notes, for every message a fetch.lua
// call moved, Redis's clock when the call ran: the instant it left the
// store, which a rate limit counts. (The handler starts later, and on a
// loaded machine FetchedAt, the reply's arrival, may lag it by tens of
// milliseconds.)
type fetchClock struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newFetchClock() *fetchClock { return &fetchClock{at: map[string]time.Time{}} }

func (f *fetchClock) after(cmd redis.Cmder) {
	sha, ok := rmqtest.ScriptSHA(cmd)
	if !ok || sha != scripts.Fetch.Hash() || cmd.Err() != nil {
		return
	}
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return
	}
	vals, err := c.Slice()
	if err != nil {
		return
	}
	var replies []scripts.FetchReply
	if args := cmd.Args(); len(args) > 3 {
		n, _ := strconv.Atoi(fmt.Sprint(args[2]))
		if 3+n < len(args) && fmt.Sprint(args[3+n]) == "M" {
			rs, errs, err := scripts.ParseMultiFetchReply(vals, len(vals))
			if err != nil {
				return
			}
			for i, r := range rs {
				if errs[i] == nil {
					replies = append(replies, r)
				}
			}
		} else if r, err := scripts.ParseFetchReply(vals); err == nil {
			replies = append(replies, r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range replies {
		for _, m := range r.Msgs {
			f.at[m.ID] = time.UnixMicro(r.NowUs)
		}
	}
}

// of returns when id left the store, or else fallback.
func (f *fetchClock) of(id string, fallback time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.at[id]; ok {
		return at
	}
	return fallback
}
