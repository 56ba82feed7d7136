// Package flow holds what bounds an engine's handlers and fetches beyond
// its fixed concurrency: the adaptive concurrency limiter (Adaptive), and
// an engine's share of its topic's topic-wide limits on a cluster (Permits).
package flow

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Adaptive is the concurrency limiter of consumer.WithAdaptiveConcurrency:
// a gradient limiter of the kind Netflix's concurrency-limits library
// calls Gradient2. Handlers' latencies are gathered in windows; each
// window compares its average (the short-run latency) with a slowly moving
// average of past windows (the long-run level):
//
//	gradient = clamp(tolerance × long / short, 0.5, 1)
//	limit    = limit × gradient + √limit   (only grown when it was used)
//
// so a latency that rises above the long-run level by more than the
// tolerance shrinks the limit (by up to half a window), and one at or below
// it grows the limit by its square root a window. A window in which more
// than a tenth of the handlers failed halves the limit, as a drop would in
// a network limiter. The long-run level follows the windows slowly, and
// quickly when latency fell to well below it, so the limit climbs back
// once the downstream recovers. The limit stays within [min, max]; it
// starts at min.
//
// The limit bounds the listeners running at once (a semaphore whose size
// moves) and, through freeCapacity, what the fetcher takes.
type Adaptive struct {
	env      AdaptiveEnv
	min, max int

	mu      sync.Mutex
	limit   float64
	running int
	free    chan struct{} // closed and replaced when a token frees or the limit rises

	// The window being gathered.
	start     time.Time
	n, failed int
	sum       time.Duration
	peak      int // the most running at once in the window
	long      float64
	report    chan struct{} // the limit changed: the reporter writes it
}

// adaptiveTolerance is how far above the long-run level a window's latency
// may be before the limit shrinks.
const adaptiveTolerance = 1.5

// Windows end after adaptiveWindowMin and at least as many samples as the
// limit (8 at least), or after adaptiveWindowMax with any.
const (
	adaptiveWindowMin = 100 * time.Millisecond
	adaptiveWindowMax = time.Second
)

// AdaptiveEnv is what an Adaptive needs of its engine.
type AdaptiveEnv struct {
	// Changed is called once the limit moved: the engine tells its
	// observer and wakes its fetcher.
	Changed func()
	// RDB, Key and Field are where the reporter writes the limit (the
	// topic's keyspace.AdaptiveKey, the client's id).
	RDB        redis.Cmdable
	Key, Field string
	Log        *slog.Logger
}

// NewAdaptive returns a limiter that moves between min and max, starting
// at min.
func NewAdaptive(env AdaptiveEnv, min, max int) *Adaptive {
	return &Adaptive{env: env, min: min, max: max, limit: float64(min), free: make(chan struct{}), report: make(chan struct{}, 1), start: time.Now()}
}

// Current returns the limit as a whole number of handlers.
func (a *Adaptive) Current() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.limit)
}

// Acquire takes a listener token within the limit; false, holding none,
// when ctx ended first.
func (a *Adaptive) Acquire(ctx context.Context) bool {
	for {
		a.mu.Lock()
		if a.running < int(a.limit) {
			a.running++
			a.peak = max(a.peak, a.running)
			a.mu.Unlock()
			return true
		}
		ch := a.free
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Release gives a token back.
func (a *Adaptive) Release() {
	a.mu.Lock()
	a.running--
	a.wakeLocked()
	a.mu.Unlock()
}

func (a *Adaptive) wakeLocked() {
	close(a.free)
	a.free = make(chan struct{})
}

// RunningNow is how many listeners hold a token.
func (a *Adaptive) RunningNow() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// Sample folds one handler's latency and outcome in; at a window's end it
// moves the limit.
func (a *Adaptive) Sample(took time.Duration, failed bool) {
	a.mu.Lock()
	a.n++
	a.sum += took
	if failed {
		a.failed++
	}
	now := time.Now()
	age := now.Sub(a.start)
	if !(age >= adaptiveWindowMax || (age >= adaptiveWindowMin && a.n >= max(8, int(a.limit)))) {
		a.mu.Unlock()
		return
	}
	old := int(a.limit)
	short := float64(a.sum) / float64(a.n)
	if a.long == 0 {
		a.long = short
	}
	gradient := math.Max(0.5, math.Min(1, adaptiveTolerance*a.long/math.Max(short, 1)))
	next := a.limit
	switch {
	case float64(a.failed) > 0.1*float64(a.n):
		next = a.limit / 2
	case gradient < 1:
		next = a.limit * gradient
	case float64(a.peak) >= a.limit/2:
		// Grown only when it was used: an idle topic's limit says nothing.
		next = a.limit + math.Sqrt(a.limit)
	}
	a.limit = math.Max(float64(a.min), math.Min(float64(a.max), next))
	// The long-run level: slowly after the windows, faster down when the
	// latency fell well below it (the downstream recovered).
	if a.long/math.Max(short, 1) > 2 {
		a.long = 0.8*a.long + 0.2*short
	} else {
		a.long = 0.95*a.long + 0.05*short
	}
	a.start, a.n, a.failed, a.sum, a.peak = now, 0, 0, 0, a.running
	changed := int(a.limit) != old
	if int(a.limit) > old {
		a.wakeLocked()
	}
	a.mu.Unlock()
	if changed {
		a.changed()
	}
}

// changed tells the observer and the reporter of a new limit.
func (a *Adaptive) changed() {
	a.env.Changed()
	select {
	case a.report <- struct{}{}:
	default:
	}
}

// adaptiveReport is how often the reporter refreshes the limit it wrote,
// and adaptiveExpiry how long a written limit counts when not refreshed
// (its client died).
const (
	adaptiveReport = 10 * time.Second
	adaptiveExpiry = 30 * time.Second
)

// RunReporter writes the limit to Redis (keyspace.AdaptiveKey, which
// rmq.Inspector.Stats reads), at most once a second when it changes and
// every adaptiveReport anyway; it removes its entry when ctx ends. An
// actor of the engine's group (doc.go).
func (a *Adaptive) RunReporter(ctx context.Context) {
	key, field := a.env.Key, a.env.Field
	write := func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		val := strconv.Itoa(a.Current()) + " " + strconv.Itoa(a.min) + " " + strconv.Itoa(a.max) + " " +
			strconv.FormatInt(time.Now().Add(adaptiveExpiry).UnixMilli(), 10)
		if err := a.env.RDB.HSet(wctx, key, field, val).Err(); err != nil && ctx.Err() == nil {
			a.env.Log.DebugContext(ctx, "rmq: report the adaptive limit", "err", err)
		}
	}
	write()
	tick := time.NewTicker(adaptiveReport)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			a.env.RDB.HDel(dctx, key, field)
			cancel()
			return
		case <-a.report:
		case <-tick.C:
		}
		write()
		// At most one write a second for changes.
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
