package inspect

import (
	"context"
	"errors"
	"fmt"
	"github.com/rmq-go/rmq/internal/history"
	"iter"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// SetLifecycle is the work of rmq.Inspector.SetLifecycle, whose doc says
// what it does: settings out of bounds are refused with
// life.ErrInvalidSettings and nothing is written.
func (i *Inspector) SetLifecycle(ctx context.Context, t topic.Topic, s life.Settings) error {
	if err := i.check(ctx, t); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if err := life.Store(ctx, i.rdb, i.prefix, t.Name(), s); err != nil {
		return err
	}
	// As SetLimits: stored first, then every slot's consumers are told
	// ("L": read the stored settings again).
	return i.tellSlots(ctx, t, "L")
}

// Lifecycle is the work of rmq.Inspector.Lifecycle.
func (i *Inspector) Lifecycle(ctx context.Context, t topic.Topic) (life.Settings, error) {
	if i.err != nil {
		return life.Settings{}, i.err
	}
	s, _, err := life.Read(ctx, i.rdb, i.prefix, t.Name())
	return s, err
}

// Locate returns the slot of t that holds id in any state a message can
// be read in (waiting, delayed, in flight, dead, or a retained record),
// or ErrMessageNotFound. The id's own slot wins when it holds it; a
// body-derived or grouped id lives in another slot, found with one
// pipeline over every slot.
func (i *Inspector) Locate(ctx context.Context, t topic.Topic, id string) (int, error) {
	if err := i.check(ctx, t); err != nil {
		return 0, err
	}
	n := t.SlotAmount()
	first := slots.IndexString(id, n)
	hits := make([][]redis.Cmder, n)
	err := i.pipelined(ctx, n, func(pipe redis.Pipeliner, s int) {
		k := i.keys(t, s)
		hits[s] = []redis.Cmder{pipe.HExists(ctx, k.Msg, id), pipe.ZScore(ctx, k.Dead, id),
			pipe.ZScore(ctx, keyspace.LifeKeysFor(i.prefix, t.Name(), s).DoneQ, id)}
	})
	if err != nil {
		return 0, fmt.Errorf("rmq: message %s of %s: %w", id, t.Name(), err)
	}
	has := func(s int) bool {
		for _, c := range hits[s] {
			if b, ok := c.(*redis.BoolCmd); ok {
				if b.Val() {
					return true
				}
			} else if c.Err() == nil {
				return true
			}
		}
		return false
	}
	if has(first) {
		return first, nil
	}
	for s := range n {
		if has(s) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: %s in %s", ErrMessageNotFound, id, t.Name())
}

// Cancel is the work of rmq.Inspector.Cancel, whose doc says what it
// does: cancel.lua on the slot that holds id.
func (i *Inspector) Cancel(ctx context.Context, t topic.Topic, id string) (bool, error) {
	slot, err := i.Locate(ctx, t, id)
	if errors.Is(err, ErrMessageNotFound) {
		// A flow's parent waiting for its children is only in its record.
		return i.cancelParent(ctx, t, id)
	}
	if err != nil {
		return false, err
	}
	s, _, err := life.Read(ctx, i.rdb, i.prefix, t.Name())
	if err != nil {
		return false, err
	}
	k := i.keys(t, slot)
	delayed := k.Delayed
	if t.Type().TimeBased() {
		delayed = k.Store
	}
	lk := keyspace.LifeKeysFor(i.prefix, t.Name(), slot).Slice()
	g := keyspace.GroupKeysFor(i.prefix, t, slot)
	// The group keys always, as Remove passes them: a cancelled message
	// that held its group's place frees it; an ungrouped one reads none.
	keys := append([]string{k.Store, k.Prepare, k.Msg, delayed, k.Wake}, lk[:]...)
	keys = append(keys, g.Queue, g.Places, g.Turn)
	n, err := scripts.Cancel.Run(ctx, i.rdb, keys, id, i.wakeCmd, s.Retention.Milliseconds(), s.Events).Int64()
	if err != nil {
		return false, fmt.Errorf("rmq: cancel %s of %s: %w", id, t.Name(), err)
	}
	if n > 0 {
		// Every cancel comes here, so here it is counted in the topic's
		// history (with the default retention: an inspector has no option
		// for it); a count that cannot be written is not a failed cancel.
		_ = history.Incr(ctx, i.rdb, i.prefix, t.Name(), history.Cancelled, 1, history.DefaultRetention)
		// A flow child's end reaches its parent.
		if err := flowtree.NewReporter(i.rdb, i.prefix).Ended(ctx, t.Name(), slot, id, 'x'); err != nil {
			return true, err
		}
	}
	return n > 0, nil
}

// cancelParent cancels id of t if it is a flow's parent waiting for its
// children (flowtree.Reporter.End): its children run on, their outcomes
// release nothing, and its own parent hears of it cancelled.
func (i *Inspector) cancelParent(ctx context.Context, t topic.Topic, id string) (bool, error) {
	slot, err := i.recordSlot(ctx, t, id)
	if errors.Is(err, ErrMessageNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ok, err := flowtree.NewReporter(i.rdb, i.prefix).End(ctx, t.Name(), slot, id, 'x')
	if ok {
		_ = history.Incr(ctx, i.rdb, i.prefix, t.Name(), history.Cancelled, 1, history.DefaultRetention)
	}
	return ok, err
}

// Events is the work of rmq.Client.Events: t's per-slot event logs
// followed as one sequence (life.Follow).
func (i *Inspector) Events(ctx context.Context, t topic.Topic, after string) iter.Seq2[life.Event, error] {
	if err := i.check(ctx, t); err != nil {
		return func(yield func(life.Event, error) bool) { yield(life.Event{}, err) }
	}
	streams := make([]string, t.SlotAmount())
	for s := range streams {
		streams[s] = keyspace.LifeKeysFor(i.prefix, t.Name(), s).Events
	}
	return life.Follow(ctx, i.rdb, streams, after)
}

// Wait is the work of rmq.Client.Wait, whose doc says what it does; w is
// the client's waiter. It registers first and reads the state after, so
// a finish between the two is in the state read or told on the wait (a
// message gone whose registration went too finished after it: its word
// comes).
func (i *Inspector) Wait(ctx context.Context, w *life.Waiter, t topic.Topic, id string) (MessageInfo, error) {
	slot, err := i.Locate(ctx, t, id)
	if err != nil {
		return MessageInfo{}, err
	}
	lk := keyspace.LifeKeysFor(i.prefix, t.Name(), slot)
	wt, err := w.Add(ctx, lk, id)
	if err != nil {
		return MessageInfo{}, err
	}
	defer wt.Done()
	rechecked := false
	for {
		info, err := i.messageAt(ctx, t, slot, id)
		if errors.Is(err, ErrMessageNotFound) && !rechecked {
			// Gone: never sent, or finished before the call and not
			// retained; or finished after the registration, and its word
			// is on its way. The script that sends the word forgets the
			// id's registrations in the same call (lifelib.lua's
			// life_notify), and nothing else lowers their count: ours
			// still counted, no word was sent.
			n, herr := i.rdb.HGet(ctx, lk.Waiters, id).Int64()
			if herr != nil && !errors.Is(herr, redis.Nil) {
				return MessageInfo{}, fmt.Errorf("rmq: wait for %s: %w", id, herr)
			}
			if n < wt.Registered {
				err = nil // the word tells
			}
		}
		if err != nil {
			return MessageInfo{}, err // ErrMessageNotFound, or a failed read
		}
		if done, err := ended(info); done {
			return info, err
		}
		select {
		case f := <-wt.C:
			return i.finished(ctx, t, slot, f)
		case <-wt.Recheck:
			// Words may have been missed while the subscription was down:
			// the state read says, and a message gone is not found.
			rechecked = true
		case <-ctx.Done():
			return MessageInfo{}, ctx.Err()
		}
	}
}

// ended says whether the state read ends a Wait, and with what error.
func ended(info MessageInfo) (bool, error) {
	switch info.State {
	case StateCompleted:
		return true, nil
	case StateDead:
		return true, life.ErrDead
	case StateCancelled:
		return true, life.ErrCancelled
	}
	return false, nil
}

// finished answers a Wait told f: the retained record (or the dead
// message) when there is one, else what the word says.
func (i *Inspector) finished(ctx context.Context, t topic.Topic, slot int, f life.Finish) (MessageInfo, error) {
	base := MessageInfo{ID: f.ID, Topic: t, Slot: slot}
	var want MessageState
	var end error
	switch f.State {
	case 'c':
		want, base.Result = StateCompleted, f.Data
	case 'd':
		want, end, base.LastError = StateDead, life.ErrDead, string(f.Data)
	case 'x':
		want, end = StateCancelled, life.ErrCancelled
	case 'r': // removed, body with it
		return MessageInfo{}, fmt.Errorf("%w: %s in %s (removed)", ErrMessageNotFound, f.ID, t.Name())
	default: // 'e': expired, dropped with its body
		return MessageInfo{}, fmt.Errorf("%w: %s in %s (expired)", ErrMessageNotFound, f.ID, t.Name())
	}
	base.State = want
	// A re-send of the id since may be what the slot holds now: only a
	// read in the state the word told is the finished message's.
	if info, err := i.messageAt(ctx, t, slot, f.ID); err == nil && info.State == want {
		return info, end
	}
	return base, end
}
