package producer

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/luascripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// Group commit: single sends that arrive together ride one pipeline, one
// script call per slot. A send finding no flush in flight makes one at once
// (no added latency); sends arriving meanwhile queue up and the next flush
// takes them all. The role of flushing passes to a queued sender, so no
// caller keeps flushing other callers' messages.

// maxGroup bounds the messages of one slot in a script call, maxCall those
// of a script call, maxFlushBytes the bodies of one flush.
const (
	maxGroup      = 512
	maxCall       = 4096
	maxFlushBytes = 8 << 20
)

// pending is one message on its way to Redis.
type pending struct {
	topic topic.Topic
	id    string
	slot  int
	score string // due ms, priority, or range ms for range-merge
	nonce string
	body  []byte

	ready chan struct{} // closed when done, or when promoted to flush next
	done  bool          // guarded by groupCommit.mu
	res   SendResult
	err   error
}

type groupCommit struct {
	mu   sync.Mutex
	busy bool
	q    []*pending
}

func (g *groupCommit) send(ctx context.Context, p *Producer, it *pending) (SendResult, error) {
	it.ready = make(chan struct{})
	g.mu.Lock()
	g.q = append(g.q, it)
	if g.busy {
		g.mu.Unlock()
		select {
		case <-it.ready:
		case <-ctx.Done():
			// The message may still be sent by the current flush, as after
			// any timeout.
			return 0, ctx.Err()
		}
		g.mu.Lock()
		if it.done {
			g.mu.Unlock()
			return it.res, it.err
		}
		// Promoted: this sender makes the next flush.
	}
	g.busy = true
	for !it.done {
		batch := g.take()
		g.mu.Unlock()
		// One caller's cancellation must not fail the others in its flush.
		_ = p.runCalls(context.WithoutCancel(ctx), p.group(batch))
		g.mu.Lock()
		for _, b := range batch {
			b.done = true
			if b != it {
				close(b.ready)
			}
		}
	}
	if len(g.q) > 0 {
		close(g.q[0].ready)
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return it.res, it.err
}

// take removes the next flush's worth of messages from the queue.
func (g *groupCommit) take() []*pending {
	n, size := 0, 0
	for n < len(g.q) && (n == 0 || size+len(g.q[n].body) <= maxFlushBytes) {
		size += len(g.q[n].body)
		n++
	}
	batch := append([]*pending(nil), g.q[:n]...)
	g.q = g.q[n:]
	return batch
}

// slotCall is one script call: messages of one topic slot.
type slotCall struct {
	topic topic.Topic
	keys  slots.Keys
	batch []*pending
}

// group splits messages into script calls by topic and slot, in order.
func (p *Producer) group(items []*pending) []slotCall {
	type key struct {
		topic string
		slot  int
	}
	idx := map[key]int{}
	var calls []slotCall
	for _, it := range items {
		k := key{it.topic.Name(), it.slot}
		i, ok := idx[k]
		if !ok || len(calls[i].batch) >= maxGroup {
			i = len(calls)
			idx[k] = i
			calls = append(calls, slotCall{topic: it.topic, keys: slots.KeysFor(p.cfg.prefix, it.topic, it.slot)})
		}
		calls[i].batch = append(calls[i].batch, it)
	}
	return calls
}

// invocations packs slot calls into script calls: on a single node one
// script call may carry several slots (up to maxCall messages), on a
// cluster each slot needs its own.
func (p *Producer) invocations(calls []slotCall) [][]slotCall {
	var out [][]slotCall
	n := 0
	for _, c := range calls {
		if len(out) == 0 || !p.merged || n+len(c.batch) > maxCall {
			out = append(out, nil)
			n = 0
		}
		out[len(out)-1] = append(out[len(out)-1], c)
		n += len(c.batch)
	}
	return out
}

// runCalls runs script calls, pipelined when there are several, and
// records each message's result. A pipelined EVALSHA does not fall back to
// EVAL, so on NOSCRIPT the scripts are loaded and the calls run again (a
// rerun is safe: each message carries its send nonce).
func (p *Producer) runCalls(ctx context.Context, calls []slotCall) error {
	inv := p.invocations(calls)
	if len(inv) == 1 {
		keys, args := sendCall(p.wakeCmd, inv[0])
		cmd := luascripts.SendBatch.Run(ctx, p.rdb, keys, args...)
		record(cmd, inv[0])
		return cmd.Err()
	}
	for attempt := 0; ; attempt++ {
		pipe := p.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(inv))
		for i, groups := range inv {
			keys, args := sendCall(p.wakeCmd, groups)
			cmds[i] = luascripts.SendBatch.EvalSha(ctx, pipe, keys, args...)
		}
		_, _ = pipe.Exec(ctx)
		noScript := false
		var firstErr error
		for i, cmd := range cmds {
			noScript = noScript || luascripts.IsNoScript(cmd.Err())
			record(cmd, inv[i])
			if firstErr == nil {
				firstErr = cmd.Err()
			}
		}
		if !noScript || attempt > 0 {
			return firstErr
		}
		if err := luascripts.Load(ctx, p.rdb); err != nil {
			return err
		}
	}
}

// sendCall returns the KEYS and ARGV of one sendbatch.lua call.
func sendCall(wakeCmd string, groups []slotCall) ([]string, []any) {
	keys := make([]string, 0, 4*len(groups))
	args := make([]any, 0, 1+2*len(groups))
	args = append(args, wakeCmd)
	for _, g := range groups {
		keys = append(keys, g.keys.Store, g.keys.Prepare, g.keys.Msg, g.keys.Wake)
		args = append(args, int(g.topic.Type()), len(g.batch))
	}
	for _, g := range groups {
		for _, b := range g.batch {
			args = append(args, b.id, b.score, b.nonce, b.body)
		}
	}
	return keys, args
}

func record(cmd *redis.Cmd, groups []slotCall) {
	res, err := cmd.Int64Slice()
	i := 0
	for _, g := range groups {
		for _, b := range g.batch {
			switch {
			case err != nil:
				b.err = err
			case i < len(res):
				b.res = SendResult(res[i])
			}
			i++
		}
	}
}
