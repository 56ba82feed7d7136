package consumer

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// waker listens on the slots' wake channels. Producers (and acks or
// rollbacks that make a message fetchable) publish the new head's score
// there; the waker records it and signals the fetcher.
type waker struct {
	c      *Consumer
	pubsub *redis.PubSub
	slotOf map[string]int
	signal chan struct{}

	mu      sync.Mutex
	all     bool
	pending map[int]float64
}

func newWaker(c *Consumer) *waker {
	w := &waker{c: c, slotOf: map[string]int{}, signal: make(chan struct{}, 1), pending: map[int]float64{}}
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

// subscribe returns once Redis confirmed the subscription, so no wake-up
// published after Start returns can be missed.
func (w *waker) subscribe(ctx context.Context) error {
	chans := w.channels()
	if cc, ok := w.c.rdb.(*redis.ClusterClient); ok {
		w.pubsub = cc.SSubscribe(ctx, chans...)
	} else {
		w.pubsub = w.c.rdb.Subscribe(ctx, chans...)
	}
	if _, err := w.pubsub.Receive(ctx); err != nil {
		_ = w.pubsub.Close()
		return fmt.Errorf("rmq: subscribe to wake-ups of %s: %w", w.c.topic.Name(), err)
	}
	return nil
}

func (w *waker) run(wg *sync.WaitGroup) {
	defer wg.Done()
	defer w.pubsub.Close()
	ch := w.pubsub.ChannelWithSubscriptions()
	ctx := w.c.runCtx
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
				// the connection was down, so every slot is looked at.
				w.mu.Lock()
				w.all = true
				w.mu.Unlock()
			case *redis.Message:
				slot, ok := w.slotOf[m.Channel]
				if !ok {
					continue
				}
				score, err := strconv.ParseFloat(m.Payload, 64)
				if err != nil {
					score = -1
				}
				w.mu.Lock()
				if old, seen := w.pending[slot]; !seen || w.better(score, old) {
					w.pending[slot] = score
				}
				w.mu.Unlock()
			}
			select {
			case w.signal <- struct{}{}:
			default:
			}
		}
	}
}

// better reports whether a wake-up score beats the one already pending:
// the earliest due time, or the highest priority. An unparsable score (-1)
// means "look at the slot" and always wins.
func (w *waker) better(score, old float64) bool {
	if score < 0 {
		return true
	}
	if w.c.topic.Type().TimeBased() {
		return score < old
	}
	return score > old && old >= 0
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
