// Package pullwait wakes the rmq.Client Pulls that wait on a topic, per
// topic and as few as the messages need:
//   - a wake-up of a topic (a send, a redelivery) wakes one Pull waiting on
//     it, not the Pulls of other topics nor all of its own;
//   - of the Pulls waiting on a topic, one (the owner) sleeps until the
//     topic's next due time; the others sleep until a wake-up or the end of
//     their wait;
//   - a woken Pull that takes messages and sees more due at once wakes all
//     the others; one that sees the next due later, or that leaves while it
//     owned the due time or held an unused wake-up, wakes one, which then
//     fetches and takes the due time over. A priority topic does not tell
//     whether more wait (they are not timed): a Pull that takes from one
//     wakes two, so a burst still spreads to every waiter in a few steps.
//
// So a message coming due costs about two fetches however many Pulls wait
// (a herd of every waiter fetching for one message before), and a burst
// still reaches every waiter.
package pullwait

import (
	"sync"
	"sync/atomic"
	"time"
)

// Waiter is one waiting Pull: a wake-up of any of its topics leaves a
// token in C (capacity one; more wake-ups before it looks add nothing).
type Waiter struct{ C chan struct{} }

// NewWaiter returns a waiter without a token.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

// Topic is one topic's waiting Pulls. The zero value is ready.
type Topic struct {
	wakes   atomic.Uint64 // wake-ups so far: a Pull compares it across its fetch
	mu      sync.Mutex
	waiters map[*Waiter]struct{}
	// owner sleeps until ownerDue, the earliest due time a waiter saw.
	owner    *Waiter
	ownerDue time.Time
}

// Wakes counts the wake-ups so far: a Pull reads it before a fetch, and a
// change after the fetch says a wake-up came in between.
func (e *Topic) Wakes() uint64 { return e.wakes.Load() }

// Wake records a wake-up of the topic and wakes one waiting Pull (the
// engine's OnWake).
func (e *Topic) Wake() {
	e.wakes.Add(1)
	e.Signal(1)
}

// WakeAll wakes every waiting Pull (Close).
func (e *Topic) WakeAll() {
	e.wakes.Add(1)
	e.Signal(-1)
}

// Signal leaves a token with n waiters that had none (every waiter for
// n < 0); fewer if fewer are without one: those with one will fetch.
func (e *Topic) Signal(n int) {
	e.mu.Lock()
	e.signalLocked(n)
	e.mu.Unlock()
}

func (e *Topic) signalLocked(n int) {
	for w := range e.waiters {
		if n == 0 {
			return
		}
		select {
		case w.C <- struct{}{}:
			n--
		default:
		}
	}
}

// Watch makes w a waiter of the topic.
func (e *Topic) Watch(w *Waiter) {
	e.mu.Lock()
	if e.waiters == nil {
		e.waiters = map[*Waiter]struct{}{}
	}
	e.waiters[w] = struct{}{}
	e.mu.Unlock()
}

// Claim makes w the owner of the topic's due time when there is none or w
// saw an earlier one; it reports whether w owns it. A negative wait
// (nothing known to come due) gives up what w owned.
func (e *Topic) Claim(w *Waiter, now time.Time, wait time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if wait < 0 {
		if e.owner == w {
			e.owner = nil
		}
		return false
	}
	due := now.Add(wait)
	if e.owner == nil || e.owner == w || due.Before(e.ownerDue) {
		e.owner, e.ownerDue = w, due
		return true
	}
	return false
}

// Handoff says whom a leaving waiter wakes on one of its topics.
type Handoff int

const (
	HandNone Handoff = iota // none (one if it owned the due time)
	HandNext                // one, unless another waiter owns an earlier due time
	HandTwo                 // two: more may wait (a priority topic)
	HandAll                 // every waiter: more messages are due now
)

// Leave unregisters w; next is the due time its last fetch saw (for
// HandNext).
func (e *Topic) Leave(w *Waiter, h Handoff, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waiters, w)
	owned := e.owner == w
	if owned {
		e.owner = nil
	}
	switch {
	case h == HandAll:
		e.signalLocked(-1)
	case h == HandTwo:
		e.signalLocked(2)
	case owned, h == HandNext && (e.owner == nil || e.ownerDue.After(next)):
		e.signalLocked(1)
	}
}
