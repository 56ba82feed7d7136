package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// errUnsupported marks a case a system has no API for.
var errUnsupported = errors.New("not supported")

// system is one queue library under test. Every method works on queue q (a
// topic for RMQ, a queue for asynq) and starts and stops what it needs.
type system interface {
	// name labels the system in tables and progress lines.
	name() string
	// id is a short name for files and JSON: asynq, rmq (FixedTime, the
	// type compared with asynq), rmq-rangemerge, rmq-priority.
	id() string
	// timeBased reports whether messages have a due time (the lateness
	// cases need one).
	timeBased() bool
	// produce sends n messages, due at once, with single-message calls from
	// g goroutines, timed by m.
	produce(ctx context.Context, m *meter, q string, n, g int) error
	// produceBatch sends n messages, due at once, with the batch API: g
	// goroutines, batch messages per call.
	produceBatch(ctx context.Context, m *meter, q string, n, g, batch int) error
	// consume loads a backlog of n due messages (not timed), then drains it
	// with a no-op handler (timed until the queue is empty, acks included).
	// prefetch > 0 sets RMQ's consumer.WithPrefetch (errUnsupported for
	// asynq, which has no such setting).
	consume(ctx context.Context, m *meter, q string, n, prefetch int) error
	// lateness starts a consumer, sends messages to come due at a steady
	// rate and records how late each one fired.
	lateness(ctx context.Context, q string, lc latCase) (latResult, error)
	// loadFarFuture stores n messages due in a year (waiting messages).
	// Bodies are tagged with tag, which must differ between loads of one q.
	loadFarFuture(ctx context.Context, q, tag string, n int) error
}

// settings shared by both systems.
type settings struct {
	body      int // body bytes
	producers int // goroutines sending in the lateness cases
	workers   int // handlers of the consumer
}

// makeBody returns a unique body of exactly size bytes (when size allows):
// "tag-i-dueMs-xxx…". RMQ derives ids from bodies, so bodies must differ.
func makeBody(buf []byte, size int, tag string, i int, dueMs int64) []byte {
	buf = append(buf[:0], tag...)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, dueMs, 10)
	buf = append(buf, '-')
	for len(buf) < size {
		buf = append(buf, 'x')
	}
	return buf
}

// dueOf reads the due time (Unix ms) that makeBody wrote.
func dueOf(body []byte) int64 {
	parts := strings.SplitN(string(body[:min(len(body), 64)]), "-", 4)
	if len(parts) < 4 {
		return 0
	}
	ms, _ := strconv.ParseInt(parts[2], 10, 64)
	return ms
}

// parallel runs f(i) for i in [0, n) from g goroutines and returns the first error.
func parallel(ctx context.Context, n, g int, f func(worker, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(w, i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// waitEmpty polls until every list/zset named by keys is empty.
func waitEmpty(ctx context.Context, rdb *redis.Client, keys func() []string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		pipe := rdb.Pipeline()
		var cmds []*redis.IntCmd
		for _, k := range keys() {
			if strings.HasSuffix(k, "#list") {
				cmds = append(cmds, pipe.LLen(ctx, strings.TrimSuffix(k, "#list")))
			} else {
				cmds = append(cmds, pipe.ZCard(ctx, k))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		var total int64
		for _, c := range cmds {
			total += c.Val()
		}
		if total == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("queue not empty after 60s (%d left)", total)
		}
		time.Sleep(time.Millisecond)
	}
}

// latCase is one firing-lateness case.
type latCase struct {
	rate     int           // messages per second coming due
	duration time.Duration // how long messages keep coming due
	lead     time.Duration // each message is sent this long before its due time
	tag      string        // body tag (unique per run, no '-')
}

type latResult struct {
	sent, fired int
	extra       int // deliveries beyond one per message
	p50, p99    time.Duration
	max         time.Duration
	early       int
	sendLag     time.Duration // the most a send started behind its plan
}

// latRecorder collects firing times; handlers call record.
type latRecorder struct {
	total int
	lat   []time.Duration
	fired atomic.Int64
	extra atomic.Int64
	all   chan struct{}
}

func newLatRecorder(total int) *latRecorder {
	return &latRecorder{total: total, lat: make([]time.Duration, total), all: make(chan struct{})}
}

// record notes a firing of the message with body (its due time written by
// makeBody).
func (r *latRecorder) record(body []byte) { r.recordDue(time.UnixMilli(dueOf(body))) }

// recordDue notes a firing of a message due at due.
func (r *latRecorder) recordDue(due time.Time) {
	d := time.Since(due)
	i := int(r.fired.Add(1)) - 1
	switch {
	case i < r.total:
		r.lat[i] = d
		if i == r.total-1 {
			close(r.all)
		}
	default:
		r.extra.Add(1)
	}
}

// runLateness paces sends: message i is due at t0 + i/rate (whole ms) and
// is sent lead before that, from producers goroutines. It waits for every
// message to fire (or a generous limit) and summarises.
func runLateness(ctx context.Context, lc latCase, producers, body int, rec *latRecorder, send func(ctx context.Context, body []byte, dueMs int64) error) (latResult, error) {
	total := rec.total
	interval := float64(time.Second) / float64(lc.rate)
	t0 := time.Now().Add(lc.lead + 200*time.Millisecond)
	var maxLag atomic.Int64
	err := parallelStrided(ctx, total, producers, func(buf []byte, timer *time.Timer, i int) ([]byte, error) {
		due := t0.Add(time.Duration(float64(i) * interval))
		dueMs := due.UnixMilli()
		sendAt := due.Add(-lc.lead)
		if wait := time.Until(sendAt); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return buf, ctx.Err()
			case <-timer.C:
			}
		}
		if lag := int64(time.Since(sendAt)); lag > maxLag.Load() {
			maxLag.Store(lag) // racy max: good enough for a report
		}
		buf = makeBody(buf, body, lc.tag, i, dueMs)
		return buf, send(ctx, buf, dueMs)
	})
	if err != nil {
		return latResult{}, err
	}
	limit := time.NewTimer(lc.lead + 60*time.Second)
	defer limit.Stop()
	select {
	case <-rec.all:
	case <-ctx.Done():
		return latResult{}, ctx.Err()
	case <-limit.C:
	}
	time.Sleep(50 * time.Millisecond) // catch duplicate deliveries
	n := min(int(rec.fired.Load()), total)
	return summarise(total, rec.lat[:n], int(rec.extra.Load()), time.Duration(maxLag.Load())), nil
}

// summarise turns the lateness of the first firings of total messages
// (lat, one per message that fired) into a latResult.
func summarise(total int, lat []time.Duration, extra int, sendLag time.Duration) latResult {
	n := len(lat)
	got := slices.Clone(lat)
	slices.Sort(got)
	res := latResult{sent: total, fired: n, extra: extra, sendLag: sendLag}
	if n > 0 {
		// Messages that never fired count as infinitely late.
		pct := func(p float64) time.Duration {
			i := int(math.Ceil(p*float64(total))) - 1
			if i >= n {
				return time.Duration(math.MaxInt64)
			}
			return got[max(i, 0)]
		}
		res.p50, res.p99, res.max = pct(0.50), pct(0.99), got[n-1]
		if n < total {
			res.max = time.Duration(math.MaxInt64)
		}
		for _, d := range got {
			if d < 0 {
				res.early++
			}
		}
	}
	return res
}

// parallelStrided runs f for i = w, w+g, w+2g … on goroutine w (so each
// goroutine's sends are in due order), with a buffer and a timer each.
func parallelStrided(ctx context.Context, n, g int, f func(buf []byte, timer *time.Timer, i int) ([]byte, error)) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 256)
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for i := w; i < n && ctx.Err() == nil; i += g {
				var err error
				if buf, err = f(buf, timer, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
