package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rmq-go/rmq/internal/engine/redisops"
)

// waker keeps what one engine heard on its slots' wake channels. Producers
// (and acks or rollbacks that make a message fetchable) publish the new
// head's score there; the client's wake hub (wake.Hub), which holds the
// one subscription for every topic, hands each wake-up to the waker, which
// records it and signals the fetcher. The waker owns no connection and no
// goroutine.
type waker struct {
	c      *Engine
	signal chan struct{}

	// pauseMu orders the reads of the topic's pause state: each read takes
	// a sequence number before it starts (wake.Hub.NextPauseSeq), and one older
	// than the last applied is dropped. confirmed is the state last read;
	// holds counts payloads heard whose read is not applied yet. The
	// engine is paused (c.paused) while either says so.
	pauseMu   sync.Mutex
	pauseSeq  uint64
	confirmed bool
	holds     int

	mu      sync.Mutex
	all     bool
	pending map[int]float64
	delayed map[int]float64 // slot -> earliest delayed due time (ms) heard of
}

func newWaker(c *Engine) *waker {
	return &waker{c: c, signal: make(chan struct{}, 1), pending: map[int]float64{}, delayed: map[int]float64{}}
}

// Channels returns the wake channel of every slot, by slot.
func (w *waker) Channels() []string {
	out := make([]string, len(w.c.keys))
	for i, k := range w.c.keys {
		out[i] = k.Wake
	}
	return out
}

// register registers the engine's channels with the hub and returns once
// Redis confirmed their subscription, so no wake-up published after Start
// returns can be missed. ctx bounds only that; on error nothing stays
// registered. A waker has no goroutine: the hub's receiver calls it.
func (w *waker) register(ctx context.Context) error {
	if err := w.c.hub.wake.Register(ctx, w); err != nil {
		return fmt.Errorf("rmq: subscribe to wake-ups of %s: %w", w.c.topic.Name(), err)
	}
	return nil
}

// unregister unregisters the engine's channels: the hub unsubscribes those
// no other engine listens to, and never calls this waker again.
func (w *waker) unregister() { w.c.hub.wake.Unregister(w) }

// Message records a wake-up of slot (its new head score); it reports
// whether the fetcher should be signalled now. Pause and resume payloads go
// to the hub's pauser, which signals once it read the state.
func (w *waker) Message(payload string, slot int) bool {
	kind, score := parseWake(payload)
	switch kind {
	case wakePause, wakeResume:
		// Inspector.Pause / Resume of the topic (told on every slot): the
		// stored state decides, not the payload (see wake.Hub.Recheck);
		// nothing is fetched until it is read.
		w.hold()
		w.c.hub.wake.Recheck(w, kind == wakePause)
		return false
	case wakeLimits:
		// Inspector.SetLimits, or a change of the lifecycle settings:
		// the next fetch reads the stored ones.
		w.c.flow.MarkReread()
		w.c.ops.Life.MarkReread()
		return true
	case wakeCancel:
		// A delivery was cancelled: its handler here, if any, stops now.
		if token, id, ok := parseCancel(payload); ok {
			w.c.cancelDelivery(slot, token, id)
		}
		return false
	case wakeGrouped:
		// A producer's first grouped send: serve the groups (flow/state.go),
		// looking at every slot again.
		w.c.flow.MarkGrouped()
		w.mu.Lock()
		w.all = true
		w.mu.Unlock()
		return true
	case wakeTree:
		// A flow's nodes were staged or made live here: the slot's flow
		// scans begin (flows.go).
		w.c.markFlowSlots(slot)
		return false
	case wakeDelayed:
		w.mu.Lock()
		if old, seen := w.delayed[slot]; !seen || score < old {
			w.delayed[slot] = score
		}
		w.mu.Unlock()
		return true
	}
	w.mu.Lock()
	if old, seen := w.pending[slot]; !seen || w.better(score, old) {
		w.pending[slot] = score
	}
	w.mu.Unlock()
	w.c.hub.leases.Heard(w.c.lease())
	return true
}

// ApplyPaused records the pause state a read that started with seq found,
// unless a read that started later was applied already.
//
// It reports whether the state read changed; the caller tells the
// observers (engine.pauseChanged) once it holds no lock of the hub, since
// an observer is user code that may start or close topics.
func (w *waker) ApplyPaused(seq uint64, paused bool) (changed bool) {
	w.pauseMu.Lock()
	defer w.pauseMu.Unlock()
	if seq <= w.pauseSeq {
		return false
	}
	w.pauseSeq = seq
	changed = w.confirmed != paused
	w.confirmed = paused
	w.c.paused.Store(w.confirmed || w.holds > 0)
	return changed
}

// hold stops fetching until the pause state is read again (Release): a
// pause or resume payload was heard, and a wake-up that follows it on a
// channel (a send after Inspector.Pause returned) must not be fetched
// before the read says whether the topic is paused.
func (w *waker) hold() {
	w.pauseMu.Lock()
	defer w.pauseMu.Unlock()
	w.holds++
	w.c.paused.Store(true)
}

// Release ends a hold once the read it waited for was applied.
func (w *waker) Release() {
	w.pauseMu.Lock()
	defer w.pauseMu.Unlock()
	w.holds--
	w.c.paused.Store(w.confirmed || w.holds > 0)
}

// takeDelayed returns and clears the delayed due times that arrived
// ('d' wake-ups: a priority message waits in a slot's delayed set until
// then).
func (w *waker) takeDelayed() map[int]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.delayed) == 0 {
		return nil
	}
	d := w.delayed
	w.delayed = map[int]float64{}
	return d
}

// MarkAll makes every slot unknown after the subscription was made again:
// wake-ups published while it was missing are lost, so the fetcher reads
// every head again. It does not signal (the hub pokes once the pause state
// was read again).
func (w *waker) MarkAll() {
	w.mu.Lock()
	w.all = true
	w.mu.Unlock()
}

// LookAt marks one slot "look now" (head unknown) after its channel's
// subscription was (re)made (a cluster's channels are subscribed one by
// one). It does not signal.
func (w *waker) LookAt(slot int) {
	w.mu.Lock()
	w.pending[slot] = -1
	w.mu.Unlock()
}

// better reports whether a wake-up score beats the one already pending:
// the earliest due time, or the highest priority. An unparsable score (-1)
// means "look at the slot" and always wins.
func (w *waker) better(score, old float64) bool {
	return score < 0 || old >= 0 && redisops.BetterScore(w.c.topic.Type().TimeBased(), score, old)
}

// reset makes the fetcher look at slot again from scratch (its head is
// unknown), e.g. because this consumer just started owning it.
func (w *waker) reset(slot int) {
	w.LookAt(slot)
	w.Poke()
}

// Poke wakes the fetcher so it re-plans (and a pull engine's waiters).
func (w *waker) Poke() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
	if w.c.onWake != nil {
		w.c.onWake()
	}
}

// take returns and clears what arrived since the last call.
func (w *waker) take() (all bool, pending map[int]float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, pending = w.all, w.pending
	w.all = false
	if len(pending) == 0 {
		return all, nil
	}
	w.pending = map[int]float64{}
	return all, pending
}

// The topic and engine the wake hub's pauser reads and tells (wake.Target).

func (w *waker) Prefix() string           { return w.c.cfg.prefix }
func (w *waker) TopicName() string        { return w.c.topic.Name() }
func (w *waker) Logger() *slog.Logger     { return w.c.cfg.logger }
func (w *waker) PauseChanged(paused bool) { w.c.pauseChanged(paused) }
