// Package groupcommit runs requests that arrive together in shared rounds:
// a request that finds a free round slot starts a round at once (no timer,
// no added latency), and requests that arrive while the rounds in flight
// are busy queue up and ride the next round together. The producer's
// sends and the consumer's acks use it.
//
// A caller of Do that gives up (its context ends) before its request ran
// leaves the request queued: it is still run by a later round, as after
// any timeout. A caller of DoUnlessDone takes its request back instead,
// unless a round took it already. Whoever leaves makes sure the queue is
// not left without a caller to run it.
//
// The producer's sends, the consumer's fetches and acks, and the starting
// consumers' reads use it.
package groupcommit

import (
	"context"
	"sync"
)

// Group batches values of type T into rounds. The zero value is not
// usable; make one with New.
type Group[T any] struct {
	run      func(ctx context.Context, batch []T)
	take     func(queued []T) int
	inFlight int // the most rounds running at once

	mu      sync.Mutex
	q       []*entry[T]
	running int
	// serving: a Serve goroutine runs the rounds no caller is left to run;
	// kick wakes it (buffered, one pending).
	serving bool
	kick    chan struct{}
	// idle, when not nil, is closed once no value queues and no round
	// runs (Idle).
	idle chan struct{}
}

type entry[T any] struct {
	v     T
	taken bool          // guarded by Group.mu: a round took it
	done  bool          // guarded by Group.mu
	wake  chan struct{} // non-nil while its caller waits; closed to wake it
	then  func()        // Go's callback: called once the round that ran v is over
}

// New returns a group that runs a round with run, at most inFlight rounds
// at a time. take, when not nil, says how many of the queued values the
// next round takes (at least one); nil takes them all. run records each
// value's result in the value itself; it must not keep the slice.
func New[T any](inFlight int, run func(ctx context.Context, batch []T), take func(queued []T) int) *Group[T] {
	return &Group[T]{run: run, take: take, inFlight: max(inFlight, 1)}
}

// Do queues v and returns when a round has run it (nil), or when ctx ends
// first (ctx's error; v may still run later). Rounds run with a context
// that carries ctx's values but not its cancellation, so one caller giving
// up does not fail the others of its round.
func (g *Group[T]) Do(ctx context.Context, v T) error {
	e := &entry[T]{v: v}
	g.mu.Lock()
	g.q = append(g.q, e)
	var err error
	for !e.done {
		if g.running < g.inFlight && len(g.q) > 0 {
			g.roundLocked(ctx)
			continue
		}
		wake := make(chan struct{})
		e.wake = wake
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		g.mu.Lock()
		e.wake = nil
		if err != nil && !e.done {
			break
		}
		err = nil
	}
	g.leaveLocked(ctx)
	g.mu.Unlock()
	return err
}

// DoUnlessDone queues v as Do does, but when ctx ends before a round took
// v, v leaves the queue and never runs: the call returns ctx's error. Once
// a round took v, it waits for that round whatever ctx says, and returns
// nil. It is for work that must not happen for a caller who is gone (a
// fetch would lease messages no handler takes). A ctx done already queues
// nothing.
func (g *Group[T]) DoUnlessDone(ctx context.Context, v T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := &entry[T]{v: v}
	done := ctx.Done()
	g.mu.Lock()
	g.q = append(g.q, e)
	for !e.done {
		if g.running < g.inFlight && !e.taken {
			if err := ctx.Err(); err != nil {
				g.dropLocked(e)
				g.leaveLocked(ctx)
				g.mu.Unlock()
				return err
			}
			g.roundLocked(ctx)
			continue
		}
		wake := make(chan struct{})
		e.wake = wake
		g.mu.Unlock()
		gaveUp := false
		select {
		case <-wake:
		case <-done:
			gaveUp = true
		}
		g.mu.Lock()
		e.wake = nil
		switch {
		case gaveUp && e.taken:
			// Its round runs: wait for it.
			done = nil
		case gaveUp && !e.done:
			g.dropLocked(e)
			g.leaveLocked(ctx)
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	g.leaveLocked(ctx)
	g.mu.Unlock()
	return nil
}

// dropLocked takes e, which no round took, out of the queue.
func (g *Group[T]) dropLocked(e *entry[T]) {
	for i, x := range g.q {
		if x == e {
			g.q = append(g.q[:i], g.q[i+1:]...)
			break
		}
	}
	g.noteIdleLocked()
}

// Idle returns a channel that is closed once no value queues for a round
// and no round runs: closed already when that is so now.
func (g *Group[T]) Idle() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.q) == 0 && g.running == 0 {
		return closedChan
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	return g.idle
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// noteIdleLocked closes the channel Idle handed out once the group is
// idle.
func (g *Group[T]) noteIdleLocked() {
	if g.idle != nil && len(g.q) == 0 && g.running == 0 {
		close(g.idle)
		g.idle = nil
	}
}

// Go queues v and returns without waiting for it; then, when not nil, is
// called once a round has run v, on the goroutine that ran that round.
// While Serve runs, Go never runs a round itself: Serve's goroutine does
// (or a Do caller whose own value shares the round). Without Serve, a
// caller that finds a round slot free runs the rounds no waiting caller
// takes before Go returns, as Do does. Rounds run with a context that
// carries ctx's values, never its cancellation: a value queued by Go
// always runs.
func (g *Group[T]) Go(ctx context.Context, v T, then func()) {
	e := &entry[T]{v: v, then: then}
	g.mu.Lock()
	g.q = append(g.q, e)
	g.leaveLocked(ctx)
	g.mu.Unlock()
}

// Serve runs, until ctx ends, the rounds of values no caller waits for
// (queued by Go, or by a Do caller that gave up), so that every caller
// returns once its own value ran instead of running other callers'
// rounds. When ctx ends it runs what is still queued, and from then on
// callers run such rounds themselves again. One Serve at a time.
func (g *Group[T]) Serve(ctx context.Context) {
	g.mu.Lock()
	g.serving = true
	if g.kick == nil {
		g.kick = make(chan struct{}, 1)
	}
	kick := g.kick
	g.runQueuedLocked(ctx)
	g.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			g.mu.Lock()
			g.serving = false
			g.runQueuedLocked(ctx)
			g.mu.Unlock()
			return
		case <-kick:
		}
		g.mu.Lock()
		g.runQueuedLocked(ctx)
		g.mu.Unlock()
	}
}

// runQueuedLocked runs rounds while values queue and a round slot is free
// (the callers running rounds now leave and kick again when they are done).
func (g *Group[T]) runQueuedLocked(ctx context.Context) {
	for len(g.q) > 0 && g.running < g.inFlight {
		g.roundLocked(ctx)
	}
}

// roundLocked runs one round of the queue's head; g.mu is held on entry
// and on return, not while the round runs.
func (g *Group[T]) roundLocked(ctx context.Context) {
	vals := make([]T, len(g.q))
	for i, e := range g.q {
		vals[i] = e.v
	}
	n := len(g.q)
	if g.take != nil {
		n = min(max(g.take(vals), 1), len(g.q))
	}
	vals = vals[:n:n]
	batch := append([]*entry[T](nil), g.q[:n]...)
	for _, e := range batch {
		e.taken = true
	}
	// The queue's backing array must not keep finished values (message
	// bodies) alive until it is reallocated.
	clear(g.q[:n])
	g.q = g.q[n:]
	g.running++
	g.mu.Unlock()
	g.run(context.WithoutCancel(ctx), vals)
	g.mu.Lock()
	g.running--
	g.noteIdleLocked()
	callbacks := false
	for _, e := range batch {
		e.done = true
		if e.wake != nil {
			close(e.wake)
			e.wake = nil
		}
		callbacks = callbacks || e.then != nil
	}
	if callbacks {
		// Outside the lock, with the round's slot free again: the next
		// round need not wait for them.
		g.mu.Unlock()
		for _, e := range batch {
			if e.then != nil {
				e.then()
			}
		}
		g.mu.Lock()
	}
}

// leaveLocked is called by a caller about to return. If values still
// queue and a round slot is free, a waiting caller is woken to run it; if
// no caller waits for any of them (queued by Go, or their callers gave
// up), Serve's goroutine is kicked to run them, or without Serve this
// caller runs them.
func (g *Group[T]) leaveLocked(ctx context.Context) {
	for len(g.q) > 0 && g.running < g.inFlight {
		for _, e := range g.q {
			if e.wake != nil {
				close(e.wake)
				e.wake = nil
				return
			}
		}
		if g.serving {
			select {
			case g.kick <- struct{}{}:
			default:
			}
			return
		}
		g.roundLocked(ctx)
	}
}
