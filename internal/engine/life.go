package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
)

// A message's life after hand-off, the engine's part: every ack names the
// slot's life keys (withLife), so a waiter anywhere hears of every
// completion and a retaining topic keeps the result; a handler stores its
// progress through the writer its context carries (writeProgress); and a
// cancel of a running delivery (cancel.lua) reaches its handler through
// the slot's wake channel (cancelDelivery).

// withLife makes r a life group of slot under l's settings, carrying
// result.
func withLife(r *ack.Req, l *redisops.Life, slot int, result []byte) {
	s := l.Current()
	r.Life, r.HasLife = l.Keys(slot), true
	r.Retention, r.Events, r.Result = s.Retention.Milliseconds(), int64(s.Events), result
}

// writeProgress is the progress writer of the engine's handlers
// (options.ProgressFunc, consumer.Message.SetProgress): progress.lua on
// the delivery's slot.
func (c *Engine) writeProgress(ctx context.Context, slot int, id string, token int64, p []byte) error {
	if slot < 0 || slot >= len(c.keys) {
		return fmt.Errorf("%w: slot %d of %s", consumer.ErrNotCurrent, slot, c.topic.Name())
	}
	lk := c.ops.Life.Keys(slot)
	// lk[5] is the progress hash, lk[2] the event log (keyspace.LifeKeys.Slice).
	n, err := scripts.Progress.Run(ctx, c.rdb, []string{c.keys[slot].Prepare, lk[5], lk[2]}, id, token, p, c.ops.Life.Current().Events).Int64()
	if err != nil {
		return fmt.Errorf("rmq: progress of %s on %s: %w", id, c.topic.Name(), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s on %s", consumer.ErrNotCurrent, id, c.topic.Name())
	}
	return nil
}

// parseCancel reads a cancel wake payload, "x<token>:<id>" (cancel.lua).
func parseCancel(p string) (token int64, id string, ok bool) {
	t, id, ok := strings.Cut(strings.TrimPrefix(p, "x"), ":")
	if !ok || !strings.HasPrefix(p, "x") {
		return 0, "", false
	}
	token, err := strconv.ParseInt(t, 10, 64)
	return token, id, err == nil
}

// cancelDelivery cancels the handler of this engine's delivery of id with
// token in slot, if one runs here, with cause life.ErrCancelled: cancel.lua
// left a tombstone, so its ack, rollback and lease extension are refused,
// and the delivery ends Cancelled when its handler returns. A delivery
// whose listener returned already keeps its ack's outcome (Refused).
func (c *Engine) cancelDelivery(slot int, token int64, id string) {
	c.mu.Lock()
	var found *delivery
	for d := range c.inflight {
		if d.msg.Slot == slot && d.msg.Token == token && d.msg.ID == id {
			found = d
			break
		}
	}
	if found == nil || found.ending || found.abandoned || found.cancelled {
		c.mu.Unlock()
		return
	}
	found.cancelled = true
	c.mu.Unlock()
	found.cancel(life.ErrCancelled)
}

// lifeRegistry finds the life state of a topic's engines on the hub, for
// acks by id.
type lifeRegistry struct {
	mu sync.Mutex
	by map[string][]*redisops.Life // prefix "\x00" topic
}

func (r *lifeRegistry) add(prefix, name string, l *redisops.Life) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string][]*redisops.Life{}
	}
	k := prefix + "\x00" + name
	r.by[k] = append(r.by[k], l)
}

func (r *lifeRegistry) drop(prefix, name string, l *redisops.Life) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := prefix + "\x00" + name
	ls := r.by[k]
	for i, x := range ls {
		if x == l {
			ls = append(ls[:i:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(r.by, k)
		return
	}
	r.by[k] = ls
}

// first returns a life state of the topic, nil when no engine of it runs
// on the hub.
func (r *lifeRegistry) first(prefix, name string) *redisops.Life {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ls := r.by[prefix+"\x00"+name]; len(ls) > 0 {
		return ls[0]
	}
	return nil
}

// SetProgress stores progress as the latest progress of the pulled
// delivery (a pulled delivery's context is its caller's, which carries no
// progress writer): as consumer.Message.SetProgress.
func (d *Pulled) SetProgress(ctx context.Context, progress []byte) error {
	if len(progress) > consumer.MaxProgressSize {
		return fmt.Errorf("%w: %d bytes (at most %d)", consumer.ErrProgressTooLarge, len(progress), consumer.MaxProgressSize)
	}
	return d.e.writeProgress(ctx, d.Slot, d.ID, d.Token, progress)
}
