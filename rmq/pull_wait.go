package rmq

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/topic"
)

// pullState holds the client's pull engines, one per pulled topic, made on
// the first Pull of the topic and closed by Close. Each subscribes to its
// topic's wake-ups and sweeps the leases pullers let run out, so topics
// that are only pulled are swept. byTopic and starting are guarded by the
// client's mu; an engine starts outside it (its start makes network calls).
//
// Waiting Pulls are woken per topic, and as few as the messages need:
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
type pullState struct {
	byTopic map[string]*pullEntry
	// starting counts engine starts under way, and closes by
	// ReleaseIdlePulls (pull_release.go): Close waits for them.
	starting sync.WaitGroup
	// woken counts the waits that a wake-up ended and fetches the engine
	// Pulls made; tests read them.
	woken, fetches atomic.Int64
}

// pullEntry is one topic's engine: ready is closed once its start ended,
// with p set, or err set and the entry removed (a later Pull tries again).
type pullEntry struct {
	topic topic.Topic
	ready chan struct{}
	p     *engine.Engine
	err   error

	// users counts the Pulls (and NackByID calls) holding the entry, used
	// is when the last one let go, leasedUntil when the last lease it
	// handed out runs out: what ReleaseIdlePulls looks at. Guarded by the
	// client's mu.
	users       int
	used        time.Time
	leasedUntil time.Time

	wakes   atomic.Uint64 // wake-ups so far: a Pull compares it across its fetch
	mu      sync.Mutex
	waiters map[*pullWaiter]struct{} // Pulls waiting on this topic
	// owner sleeps until ownerDue, the earliest due time a waiter saw.
	owner    *pullWaiter
	ownerDue time.Time
}

// pullWaiter is one waiting Pull: a wake-up of any of its topics leaves a
// token in ch (capacity one; more wake-ups before it looks add nothing).
type pullWaiter struct{ ch chan struct{} }

// wake is the engine's OnWake: it records a wake-up of e's topic and wakes
// one waiting Pull.
func (e *pullEntry) wake() {
	e.wakes.Add(1)
	e.mu.Lock()
	e.signalLocked(1)
	e.mu.Unlock()
}

// wakeAll wakes every waiting Pull (Close).
func (e *pullEntry) wakeAll() {
	e.wakes.Add(1)
	e.mu.Lock()
	e.signalLocked(-1)
	e.mu.Unlock()
}

// signalLocked leaves a token with n waiters that had none (every waiter
// for n < 0); fewer if fewer are without one: those with one will fetch.
func (e *pullEntry) signalLocked(n int) {
	for w := range e.waiters {
		if n == 0 {
			return
		}
		select {
		case w.ch <- struct{}{}:
			n--
		default:
		}
	}
}

func (e *pullEntry) watch(w *pullWaiter) {
	e.mu.Lock()
	if e.waiters == nil {
		e.waiters = map[*pullWaiter]struct{}{}
	}
	e.waiters[w] = struct{}{}
	e.mu.Unlock()
}

// claim makes w the owner of e's due time when there is none or w saw an
// earlier one; it reports whether w owns it. A negative wait (nothing
// known to come due) gives up what w owned.
func (e *pullEntry) claim(w *pullWaiter, now time.Time, wait time.Duration) bool {
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

// handoff says whom a leaving waiter wakes on one of its topics.
type handoff int

const (
	handNone handoff = iota // none (one if it owned the due time)
	handNext                // one, unless another waiter owns an earlier due time
	handTwo                 // two: more may wait (a priority topic)
	handAll                 // every waiter: more messages are due now
)

// leave unregisters w; next is the due time its last fetch saw (for
// handNext).
func (e *pullEntry) leave(w *pullWaiter, h handoff, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.waiters, w)
	owned := e.owner == w
	if owned {
		e.owner = nil
	}
	switch {
	case h == handAll:
		e.signalLocked(-1)
	case h == handTwo:
		e.signalLocked(2)
	case owned, h == handNext && (e.owner == nil || e.ownerDue.After(next)):
		e.signalLocked(1)
	}
}

// closeLocked is Close's part, under the client's mu after the phase moved
// to Closed: it wakes every waiting Pull (which then sees the phase) and
// returns the started engines to close; an engine whose start is under way
// is closed by its starter, and Close waits for that through starting.
func (p *pullState) closeLocked() []*engine.Engine {
	out := make([]*engine.Engine, 0, len(p.byTopic))
	for _, e := range p.byTopic {
		e.wakeAll()
		if e.p != nil {
			out = append(out, e.p)
		}
	}
	return out
}
