package consumer

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// waker listens on the slots' wake channels. Producers (and acks or
// rollbacks that make a message fetchable) publish the new head's score
// there; the waker records it and signals the fetcher.
type waker struct {
	c      *engine
	pubsub *redis.PubSub // single node: one plain subscription
	shards *shardWaker   // cluster: sharded subscriptions, one per master (waker_cluster.go)
	slotOf map[string]int
	signal chan struct{}

	mu      sync.Mutex
	all     bool
	pending map[int]float64
	delayed map[int]float64 // slot -> earliest delayed due time (ms) heard of
}

func newWaker(c *engine) *waker {
	w := &waker{c: c, slotOf: map[string]int{}, signal: make(chan struct{}, 1), pending: map[int]float64{}, delayed: map[int]float64{}}
	for i, k := range c.keys {
		w.slotOf[k.Wake] = i
	}
	return w
}

func (w *waker) channels() []string {
	out := make([]string, len(w.c.keys))
	for i, k := range w.c.keys {
		out[i] = k.Wake
	}
	return out
}

// start subscribes to the wake channels and returns once Redis confirmed
// the subscription, so no wake-up published after Start returns can be
// missed; the waker then runs until ctx ends. startCtx bounds the
// subscription only. On error nothing of the waker keeps running. On a
// cluster the channels are sharded (SSUBSCRIBE): each lives on the master
// that owns its hash slot, so there is one subscription per master, kept by
// the shard waker (waker_cluster.go), which then is the waker's goroutine.
func (w *waker) start(startCtx, ctx context.Context, wg *sync.WaitGroup) error {
	if cc, ok := w.c.rdb.(*redis.ClusterClient); ok {
		w.shards = newShardWaker(w, cc)
		if err := w.shards.start(startCtx, ctx, wg); err != nil {
			return fmt.Errorf("rmq: subscribe to wake-ups of %s: %w", w.c.topic.Name(), err)
		}
		return nil
	}
	w.pubsub = w.c.rdb.Subscribe(startCtx, w.channels()...)
	if _, err := w.pubsub.Receive(startCtx); err != nil {
		_ = w.pubsub.Close()
		return fmt.Errorf("rmq: subscribe to wake-ups of %s: %w", w.c.topic.Name(), err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.run(ctx)
	}()
	return nil
}

func (w *waker) run(ctx context.Context) {
	defer w.pubsub.Close()
	ch := w.pubsub.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				// A (re)subscription: wake-ups may have been missed while
				// the connection was down, so every slot is looked at, and
				// the pause state read again (once a connection: its first
				// confirmation counts one channel).
				if m.Count <= 1 {
					w.c.recheckPaused(ctx, nil)
				}
				w.mu.Lock()
				w.all = true
				w.mu.Unlock()
				w.c.hub.leases.resubscribed()
			case *redis.Message:
				if !w.message(ctx, m) {
					continue
				}
			}
			w.poke()
		}
	}
}

// message records a wake-up (the slot's new head score) without signalling
// the fetcher; it reports whether the channel is one of ours.
func (w *waker) message(ctx context.Context, m *redis.Message) bool {
	slot, ok := w.slotOf[m.Channel]
	if !ok {
		return false
	}
	kind, score := parseWake(m.Payload)
	switch kind {
	case wakePause, wakeResume:
		// Inspector.Pause / Resume of the topic (told on every slot): the
		// stored state decides, not the payload (see recheckPaused).
		paused := kind == wakePause
		w.c.recheckPaused(ctx, &paused)
		return true
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
	w.c.hub.leases.heard(w.c)
	return true
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

// lookAt marks the slot of a channel "look now" (head unknown) after its
// subscription was (re)made: wake-ups published while it was missing are
// lost, so the fetcher reads the slot's head again. It does not signal.
func (w *waker) lookAt(channel string) bool {
	slot, ok := w.slotOf[channel]
	if !ok {
		return false
	}
	w.mu.Lock()
	w.pending[slot] = -1
	w.mu.Unlock()
	return true
}

// better reports whether a wake-up score beats the one already pending:
// the earliest due time, or the highest priority. An unparsable score (-1)
// means "look at the slot" and always wins.
func (w *waker) better(score, old float64) bool {
	return score < 0 || old >= 0 && w.c.betterScore(score, old)
}

// reset makes the fetcher look at slot again from scratch (its head is
// unknown), e.g. because this consumer just started owning it.
func (w *waker) reset(slot int) {
	w.mu.Lock()
	w.pending[slot] = -1
	w.mu.Unlock()
	w.poke()
}

// poke wakes the fetcher so it re-plans (and a pull engine's waiters).
func (w *waker) poke() {
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
