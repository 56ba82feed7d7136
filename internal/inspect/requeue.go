package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
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

// Requeue is the work of rmq.Inspector.Requeue, whose doc says what it does.
func (i *Inspector) Requeue(ctx context.Context, t topic.Topic, ids ...string) (int, error) {
	return i.requeue(ctx, t, 0, ids)
}

// RequeueRenewed is the work of rmq.Inspector.RequeueRenewed, whose doc says what it does;
// rmq checks maxRetries and ttl first.
func (i *Inspector) RequeueRenewed(ctx context.Context, t topic.Topic, maxRetries int, ttl time.Duration, ids ...string) (int, error) {
	return i.requeue(ctx, t, fmt.Sprintf("%d,%d", maxRetries, ttl.Milliseconds()), ids)
}

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

// RequeueAll is the work of rmq.Inspector.RequeueAll, whose doc says what it does.
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

// DeleteDead is the work of rmq.Inspector.DeleteDead, whose doc says what it does.
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

// PurgeDead is the work of rmq.Inspector.PurgeDead, whose doc says what it does.
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
