package rmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Result codes of requeue.lua (see its header).
const (
	requeueNotDead  = 0
	requeueStored   = 1
	requeueMerged   = 2
	requeueMovedUp  = 3
	requeueBehind   = 4
	requeueRepeated = 5
)

// scriptBatch bounds the ids (or dead entries) one script call handles, so
// that no call holds Redis for long.
const scriptBatch = 500

// Requeue moves the dead messages with these ids back to their topic as
// fresh messages: no failed attempts, no last error; FixedTime and
// RangeMerge messages due now (Redis's clock), Priority messages at the
// priority they were sent with. It runs one script per slot (per 500 ids)
// and returns how many were requeued; ids not in the dead queue are
// skipped.
//
// A requeue never duplicates or drops a message:
//   - When a message with the same id waits in store, they merge into that
//     one, which keeps its body and history (it was sent after the dead one
//     died, so its body is the newer): a RangeMerge message keeps its due
//     time (as for any duplicate); a FixedTime message becomes due at the
//     earlier of its time and now; a Priority message takes the higher of
//     the two priorities. A requeue never delays a waiting message.
//   - When a delivery of the same id is in flight, the requeued message is
//     stored again and delivered after that delivery ends, as a send would
//     be.
//   - A script that go-redis runs twice (after a lost reply) recognises its
//     own work and changes nothing the second time.
func (i *Inspector) Requeue(ctx context.Context, t topic.Topic, ids ...string) (int, error) {
	return i.requeue(ctx, t, 0, ids)
}

// RequeueRenewed is Requeue that also sets the requeued messages' retries
// and expiry anew, as a send with producer.WithMaxRetries(maxRetries) and
// producer.WithTTL(ttl) would (ttl 0: it never expires), instead of keeping
// the ones they died with: an expiry that passed while a message was dead
// no longer drops it. A message merged into a waiting one with its id keeps
// that one's options.
func (i *Inspector) RequeueRenewed(ctx context.Context, t topic.Topic, maxRetries int, ttl time.Duration, ids ...string) (int, error) {
	if maxRetries < 0 || maxRetries > consumer.MaxMaxRetries {
		return 0, fmt.Errorf("%w: %d (want 0..%d)", producer.ErrInvalidMaxRetries, maxRetries, consumer.MaxMaxRetries)
	}
	if ttl < 0 || ttl > maxRenewTTL {
		return 0, fmt.Errorf("%w: TTL %v", producer.ErrInvalidExpiry, ttl)
	}
	return i.requeue(ctx, t, fmt.Sprintf("%d,%d", maxRetries, ttl.Milliseconds()), ids)
}

// maxRenewTTL bounds RequeueRenewed's ttl as producer.WithTTL's (about
// 100 years): the envelope keeps expiries in 48 bits of ms.
const maxRenewTTL = 100 * 365 * 24 * time.Hour

// requeue runs requeue.lua over ids with renew as its ARGV[4] (0: none).
func (i *Inspector) requeue(ctx context.Context, t topic.Topic, renew any, ids []string) (int, error) {
	if err := i.check(ctx, t); err != nil {
		return 0, err
	}
	ids = uniqueIDs(ids)
	if len(ids) == 0 {
		return 0, nil
	}
	found, err := i.locateDead(ctx, t, ids)
	if err != nil {
		return 0, fmt.Errorf("rmq: requeue on %s: %w", t.Name(), err)
	}
	head := []any{i.wakeCmd, scripts.Nonce(), 0, renew}
	var calls []scripts.Call
	for _, slot := range sortedSlots(found) {
		k := i.keys(t, slot)
		keys := []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}
		for batch := range slices.Chunk(found[slot], scriptBatch) {
			args := slices.Clone(head)
			for _, h := range batch {
				args = append(args, h.id)
			}
			calls = append(calls, scripts.Call{Script: scripts.Requeue, Keys: keys, Args: args})
		}
	}
	n := 0
	var errs []error
	for _, cmd := range scripts.RunAll(ctx, i.rdb, calls) {
		codes, err := cmd.Int64Slice()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range codes {
			if c >= requeueStored && c <= requeueRepeated {
				n++
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("rmq: requeue on %s: %w", t.Name(), err)
	}
	return n, nil
}

// RequeueAll requeues every message of t's dead queue that died before the
// call, as Requeue does, in batches of 500 per script call and slot (slots
// in parallel through pipelines). Messages that die while it runs stay
// dead, so a handler that keeps failing cannot make it loop. It returns how
// many were requeued.
func (i *Inspector) RequeueAll(ctx context.Context, t topic.Topic) (int, error) {
	if err := i.check(ctx, t); err != nil {
		return 0, err
	}
	now, err := i.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("rmq: requeue all on %s: %w", t.Name(), err)
	}
	active, err := i.slotsWithDead(ctx, t)
	if err != nil {
		return 0, fmt.Errorf("rmq: requeue all on %s: %w", t.Name(), err)
	}
	args := []any{i.wakeCmd, scripts.Nonce(), scriptBatch, now.UnixMilli()}
	total := 0
	for len(active) > 0 {
		calls := make([]scripts.Call, len(active))
		for j, slot := range active {
			k := i.keys(t, slot)
			calls[j] = scripts.Call{Script: scripts.Requeue, Keys: []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}, Args: args}
		}
		var next []int
		var errs []error
		for j, cmd := range scripts.RunAll(ctx, i.rdb, calls) {
			res, err := cmd.Int64Slice()
			if err != nil || len(res) != 3 {
				errs = append(errs, fmt.Errorf("slot %d: %w", active[j], errors.Join(err, errors.New("unexpected reply"))))
				continue
			}
			requeued, looked, left := res[0], res[1], res[2]
			total += int(requeued)
			// Go on while whole batches are taken and some of them moved
			// (an unreadable entry is left in place and must not loop).
			if looked == scriptBatch && left < looked {
				next = append(next, active[j])
			}
		}
		if err := errors.Join(errs...); err != nil {
			return total, fmt.Errorf("rmq: requeue all on %s: %w", t.Name(), err)
		}
		active = next
	}
	return total, nil
}

// DeleteDead deletes the dead messages with these ids, bodies with them,
// and returns how many it deleted; ids not in the dead queue are skipped.
func (i *Inspector) DeleteDead(ctx context.Context, t topic.Topic, ids ...string) (int, error) {
	if err := i.check(ctx, t); err != nil {
		return 0, err
	}
	ids = uniqueIDs(ids)
	if len(ids) == 0 {
		return 0, nil
	}
	found, err := i.locateDead(ctx, t, ids)
	if err != nil {
		return 0, fmt.Errorf("rmq: delete dead on %s: %w", t.Name(), err)
	}
	var calls []scripts.Call
	for _, slot := range sortedSlots(found) {
		k := i.keys(t, slot)
		for batch := range slices.Chunk(found[slot], scriptBatch) {
			args := []any{"ids"}
			for _, h := range batch {
				args = append(args, h.id)
			}
			calls = append(calls, scripts.Call{Script: scripts.DeleteDead, Keys: []string{k.Dead, k.DeadMsg}, Args: args})
		}
	}
	return i.sumDeleted(ctx, t, calls)
}

// PurgeDead deletes t's whole dead queue, bodies with it, one script per
// slot, and returns how many messages it deleted.
func (i *Inspector) PurgeDead(ctx context.Context, t topic.Topic) (int, error) {
	if err := i.check(ctx, t); err != nil {
		return 0, err
	}
	active, err := i.slotsWithDead(ctx, t)
	if err != nil {
		return 0, fmt.Errorf("rmq: purge dead on %s: %w", t.Name(), err)
	}
	calls := make([]scripts.Call, len(active))
	for j, slot := range active {
		k := i.keys(t, slot)
		calls[j] = scripts.Call{Script: scripts.DeleteDead, Keys: []string{k.Dead, k.DeadMsg}, Args: []any{"all"}}
	}
	return i.sumDeleted(ctx, t, calls)
}

func (i *Inspector) sumDeleted(ctx context.Context, t topic.Topic, calls []scripts.Call) (int, error) {
	n := 0
	var errs []error
	for _, cmd := range scripts.RunAll(ctx, i.rdb, calls) {
		d, err := cmd.Int64()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n += int(d)
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("rmq: delete dead on %s: %w", t.Name(), err)
	}
	return n, nil
}

// slotsWithDead lists the slots whose dead queue is not empty.
func (i *Inspector) slotsWithDead(ctx context.Context, t topic.Topic) ([]int, error) {
	cards := make([]*redis.IntCmd, t.SlotAmount())
	err := i.pipelined(ctx, t.SlotAmount(), func(pipe redis.Pipeliner, slot int) {
		cards[slot] = pipe.ZCard(ctx, i.keys(t, slot).Dead)
	})
	if err != nil {
		return nil, err
	}
	var out []int
	for slot, c := range cards {
		if c.Val() > 0 {
			out = append(out, slot)
		}
	}
	return out, nil
}

func sortedSlots(m map[int][]deadHit) []int {
	out := make([]int, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// uniqueIDs drops empty and repeated ids, keeping the first order.
func uniqueIDs(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
