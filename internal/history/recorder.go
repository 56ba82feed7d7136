package history

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of a Recorder.
const (
	// DefaultRetention is how long a topic-minute's counts stay in Redis.
	DefaultRetention = 72 * time.Hour
	// DefaultInterval is how often a recorder writes what it counted and
	// refreshes its worker record: at most one round trip per interval.
	DefaultInterval = 10 * time.Second
	// DefaultWorkerTTL is how long a worker record outlives its last
	// heartbeat: a process killed without Close leaves the list within it.
	DefaultWorkerTTL = 30 * time.Second
)

// closeFlush bounds Close's flush.
const closeFlush = 2 * time.Second

// Config configures a Recorder.
type Config struct {
	Prefix    string
	Retention time.Duration // > 0
	Interval  time.Duration // 0: DefaultInterval
	WorkerTTL time.Duration // 0: DefaultWorkerTTL
	Logger    *slog.Logger
}

// Recorder counts what one client does, per topic and minute, in memory,
// and writes it to Redis from one goroutine of its own, at most once per
// interval, in one pipelined round trip that also refreshes the client's
// worker record. Counting never waits for Redis: while Redis is down the
// counts stay in memory (those older than the retention are dropped) and
// the failed flushes are counted and logged.
type Recorder struct {
	rdb redis.UniversalClient
	cfg Config

	topics   sync.Map // topic name -> *topicCounts
	inFlight atomic.Int64
	failed   atomic.Int64 // flushes that failed
	flushes  atomic.Int64 // flushes that succeeded

	// running is set once the goroutine started (the fast path of every
	// count reads it); last is when a flush of a client without one last
	// began (Unix ns).
	running atomic.Bool
	last    atomic.Int64
	clock   atomic.Int64   // Unix ns, kept by tick while started; 0: use time.Now
	once    sync.WaitGroup // the flushes of a client without the goroutine

	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
	done   chan struct{} // loop's
	ticked chan struct{} // tick's
	kick   chan struct{}
	worker *Worker // nil until StartWorker
}

type topicCounts struct {
	mu      sync.Mutex
	minutes map[int64]*Minute // by minute start, Unix seconds
}

// New returns a recorder on rdb. It starts its goroutine at StartWorker;
// Close stops it.
func New(rdb redis.UniversalClient, cfg Config) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.WorkerTTL <= 0 {
		cfg.WorkerTTL = DefaultWorkerTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Recorder{rdb: rdb, cfg: cfg, kick: make(chan struct{}, 1)}
	r.last.Store(time.Now().UnixNano())
	return r
}

// Add adds n to the count c of topic in the current minute.
func (r *Recorder) Add(topic string, c Counter, n int64) {
	if n == 0 {
		return
	}
	tc, m, now := r.minute(topic)
	m.Counts[c] += n
	tc.mu.Unlock()
	r.ensure(now)
}

// Handler records a handler time of topic.
func (r *Recorder) Handler(topic string, took time.Duration) {
	tc, m, now := r.minute(topic)
	m.Handler[Bucket(took)]++
	tc.mu.Unlock()
	r.ensure(now)
}

// End counts the end of a delivery of topic in one step: its handler time
// (unless took < 0) and the counts c1 and c2 (each unless < 0).
func (r *Recorder) End(topic string, took time.Duration, c1, c2 Counter) {
	tc, m, now := r.minute(topic)
	if took >= 0 {
		m.Handler[Bucket(took)]++
	}
	if c1 >= 0 {
		m.Counts[c1]++
	}
	if c2 >= 0 {
		m.Counts[c2]++
	}
	tc.mu.Unlock()
	r.ensure(now)
}

// Late records a firing lateness of topic.
func (r *Recorder) Late(topic string, late time.Duration) {
	tc, m, now := r.minute(topic)
	m.Lateness[Bucket(late)]++
	tc.mu.Unlock()
	r.ensure(now)
}

// InFlight is the client's deliveries in flight (the Observer keeps the
// count), which the worker record shows.
func (r *Recorder) InFlight() int { return max(0, int(r.inFlight.Load())) }

// Flushes and Failed count the flushes that succeeded and failed.
func (r *Recorder) Flushes() int64 { return r.flushes.Load() }
func (r *Recorder) Failed() int64  { return r.failed.Load() }

// minute returns topic's counts of the current minute, locked.
func (r *Recorder) minute(topic string) (*topicCounts, *Minute, int64) {
	v, ok := r.topics.Load(topic)
	if !ok {
		v, _ = r.topics.LoadOrStore(topic, &topicCounts{minutes: map[int64]*Minute{}})
	}
	tc := v.(*topicCounts)
	now := r.now()
	sec := now / int64(time.Second)
	key := sec - sec%60
	tc.mu.Lock()
	m := tc.minutes[key]
	if m == nil {
		m = &Minute{}
		tc.minutes[key] = m
	}
	return tc, m, now
}

// now is the time a count is filed under (Unix ns): the clock the started
// recorder's ticker keeps, else time.Now. A count needs the minute only,
// and time.Now is not free (about 260 ns per call on the virtual machine
// the benchmark ran on, as much as the rest of a count together).
func (r *Recorder) now() int64 {
	if c := r.clock.Load(); c != 0 {
		return c
	}
	return time.Now().UnixNano()
}

// clockTick is how often the started recorder reads the time: a count near
// the turn of a minute may be filed up to this much late or early.
const clockTick = 100 * time.Millisecond

// tick keeps the clock until ctx ends.
func (r *Recorder) tick(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.clock.Store(now.UnixNano())
		}
	}
}

// ensure gets the counts written. A started client's goroutine writes
// them every interval; a client that was never started (a program that
// only sends, which need not Close its client) has none: its counts start
// a flush of their own, in a goroutine that lives for that one round trip,
// once an interval passed since the last. Close waits for it and writes
// the rest.
func (r *Recorder) ensure(now int64) {
	if r.running.Load() {
		return
	}
	last := r.last.Load()
	if now-last < int64(r.cfg.Interval) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.running.Load() {
		return
	}
	r.once.Add(1)
	go func() {
		defer r.once.Done()
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Interval)
		defer cancel()
		r.flush(ctx, false)
	}()
}

// startLocked starts the goroutine of a started client.
func (r *Recorder) startLocked() {
	if r.closed || r.running.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done, r.ticked = cancel, make(chan struct{}), make(chan struct{})
	r.running.Store(true)
	r.clock.Store(time.Now().UnixNano())
	go r.loop(ctx, r.done)
	go r.tick(ctx, r.ticked)
}

// Flush asks the goroutine for a flush now (a started worker's first
// heartbeat; tests).
func (r *Recorder) Flush() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Recorder) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		// A flush waits for Redis at most one interval: a Redis that does
		// not answer delays the next flush, never a count.
		fctx, cancel := context.WithTimeout(ctx, r.cfg.Interval)
		r.flush(fctx, false)
		cancel()
	}
}

// Close stops the goroutine, writes what is left and deletes the worker
// record, bounded by ctx. Counts after Close stay in memory.
func (r *Recorder) Close(ctx context.Context) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	cancel, done, ticked := r.cancel, r.done, r.ticked
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
		<-ticked
		r.clock.Store(0) // counts after Close: time.Now
	}
	r.once.Wait()
	// The last flush waits for Redis at most closeFlush: a Close while
	// Redis is down loses the last counts rather than hanging.
	ctx, stop := context.WithTimeout(ctx, closeFlush)
	defer stop()
	r.flush(ctx, true)
}

// pending takes every count out of memory.
type pendingMinute struct {
	topic  string
	minute int64
	m      *Minute
}

func (r *Recorder) take() []pendingMinute {
	var out []pendingMinute
	r.topics.Range(func(k, v any) bool {
		tc := v.(*topicCounts)
		tc.mu.Lock()
		// An empty map stays in place and is not read below: the
		// counting goroutines write it once the lock is released.
		var ms map[int64]*Minute
		if len(tc.minutes) > 0 {
			ms = tc.minutes
			tc.minutes = make(map[int64]*Minute, 1)
		}
		tc.mu.Unlock()
		for minute, m := range ms {
			out = append(out, pendingMinute{topic: k.(string), minute: minute, m: m})
		}
		return true
	})
	return out
}

// putBack returns counts a failed flush did not write, unless they are
// older than the retention.
func (r *Recorder) putBack(p pendingMinute, m *Minute) {
	if time.Since(time.Unix(p.minute, 0)) > r.cfg.Retention {
		return
	}
	v, _ := r.topics.LoadOrStore(p.topic, &topicCounts{minutes: map[int64]*Minute{}})
	tc := v.(*topicCounts)
	tc.mu.Lock()
	if cur := tc.minutes[p.minute]; cur != nil {
		cur.add(m)
	} else {
		tc.minutes[p.minute] = m
	}
	tc.mu.Unlock()
}

// field is one HINCRBY of a flush: which count it carries, to put it back
// when the command failed.
type field struct {
	p   int // index into the pending minutes
	set func(m *Minute, n int64)
	n   int64
	cmd *redis.IntCmd
}

// flush writes the counts taken from memory, every topic-minute's fields
// by HINCRBY and its expiry by EXPIREAT, and the worker record, in one
// pipeline; last deletes the worker record instead.
func (r *Recorder) flush(ctx context.Context, last bool) {
	ps := r.take()
	r.mu.Lock()
	w := r.worker
	r.mu.Unlock()
	if len(ps) == 0 && w == nil {
		return
	}
	pipe := r.rdb.Pipeline()
	var fields []field
	for i, p := range ps {
		key := Key(r.cfg.Prefix, p.topic, time.Unix(p.minute, 0))
		incr := func(name string, n int64, set func(*Minute, int64)) {
			if n != 0 {
				fields = append(fields, field{p: i, set: set, n: n, cmd: pipe.HIncrBy(ctx, key, name, n)})
			}
		}
		for c := range p.m.Counts {
			incr(counterFields[c], p.m.Counts[c], func(m *Minute, n int64) { m.Counts[c] += n })
		}
		for j := range p.m.Handler {
			incr(handlerFields[j], p.m.Handler[j], func(m *Minute, n int64) { m.Handler[j] += n })
			incr(lateFields[j], p.m.Lateness[j], func(m *Minute, n int64) { m.Lateness[j] += n })
		}
		pipe.ExpireAt(ctx, key, time.Unix(p.minute, 0).Add(r.cfg.Retention))
	}
	if w != nil {
		if last {
			w.remove(ctx, pipe, r.cfg.Prefix)
		} else {
			w.beat(ctx, pipe, r.cfg.Prefix, r.cfg.WorkerTTL, r.InFlight())
		}
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		r.flushes.Add(1)
		return
	}
	r.failed.Add(1)
	back := map[int]*Minute{}
	for _, f := range fields {
		if f.cmd.Err() == nil {
			continue
		}
		m := back[f.p]
		if m == nil {
			m = &Minute{}
			back[f.p] = m
		}
		f.set(m, f.n)
	}
	for i, m := range back {
		r.putBack(ps[i], m)
	}
	r.cfg.Logger.WarnContext(ctx, "rmq: could not write history and worker record; counts kept in memory", "err", err, "failed_flushes", r.failed.Load())
}
