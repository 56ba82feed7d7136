package producer

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Group commit: single sends that arrive together ride one pipeline (one
// script call on a single node, one per slot on a cluster). A send that
// finds a free flush slot flushes at once (no timer, no added latency);
// sends arriving meanwhile queue up and the next flush takes them all. Two
// flushes may be in flight, so the client prepares one while Redis runs
// the other.

// maxGroup bounds the messages of one slot in a script call, maxCall those
// of a script call (about 8 ms of Redis time, during which Redis serves no
// one else), maxFlushBytes the bodies of one flush; flushesInFlight is how
// many flushes may run at once.
const (
	maxGroup        = 512
	maxCall         = 1024
	maxFlushBytes   = 8 << 20
	flushesInFlight = 2
)

// pending is one message on its way to Redis.
type pending struct {
	topic topic.Topic
	id    string
	slot  int
	score float64 // due ms, priority, or range ms for range-merge
	nonce uint64  // scripts.NewNonce
	body  []byte
	job   jobConfig
	opts  []byte // the envelope's options block; nil for none
	// unique is WithUniqueFor's window in ms; 0 for none.
	unique int64

	res SendResult // set by the flush
	err error
}

// scoreText is score as the scripts read it (go-redis writes a float64
// argument the same way).
func (it *pending) scoreText() string { return strconv.FormatFloat(it.score, 'f', -1, 64) }

// encodeOptions turns the per-message options into the envelope's options
// block, after the send hooks ran (they may have added headers).
func (it *pending) encodeOptions() error {
	o, err := it.job.options(time.Now())
	it.opts = o
	return err
}

func newGroupCommit(p *Producer) *groupcommit.Group[*pending] {
	return groupcommit.New(flushesInFlight, func(ctx context.Context, batch []*pending) {
		_ = p.runCalls(ctx, p.group(batch))
	}, flushSize)
}

// flushSize is how many queued messages the next flush takes.
func flushSize(q []*pending) int {
	n, size := 0, 0
	for n < len(q) && (n == 0 || size+len(q[n].body) <= maxFlushBytes) {
		size += len(q[n].body)
		n++
	}
	return n
}

// slotCall is one script call: messages of one topic slot. Messages that
// carry a group (WithGroup) go in calls of their own, to gsend.lua.
type slotCall struct {
	topic   topic.Topic
	keys    keyspace.Keys
	grouped bool
	batch   []*pending
	// events is the topic's event log length (0: none): above 0 the call
	// names the slot's event log and records "sent" for each message.
	events int64
}

// group splits messages into script calls by topic and slot, in order.
func (p *Producer) group(items []*pending) []slotCall {
	type key struct {
		topic   string
		slot    int
		grouped bool
	}
	idx := map[key]int{}
	var calls []slotCall
	for _, it := range items {
		k := key{it.topic.Name(), it.slot, it.job.group != ""}
		i, ok := idx[k]
		if !ok || len(calls[i].batch) >= maxGroup {
			i = len(calls)
			idx[k] = i
			calls = append(calls, slotCall{topic: it.topic, keys: keyspace.KeysFor(p.prefix, it.topic, it.slot), grouped: k.grouped,
				events: p.events(k.topic)})
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
		if len(out) == 0 || !p.merged || n+len(c.batch) > maxCall || out[len(out)-1][0].grouped != c.grouped {
			out = append(out, nil)
			n = 0
		}
		out[len(out)-1] = append(out[len(out)-1], c)
		n += len(c.batch)
	}
	return out
}

// runCalls runs script calls, pipelined when there are several
// (scripts.RunAll sends again only calls refused with NOSCRIPT), and
// records each message's result.
func (p *Producer) runCalls(ctx context.Context, calls []slotCall) error {
	inv := p.invocations(calls)
	sc := make([]scripts.Call, len(inv))
	for i, groups := range inv {
		if groups[0].grouped {
			keys, args := p.gsendCall(groups)
			sc[i] = scripts.Call{Script: scripts.GSend, Keys: keys, Args: args}
			continue
		}
		sc[i] = p.sendCall(groups)
	}
	var firstErr error
	sent := time.Now()
	cmds := scripts.RunAll(ctx, p.rdb, sc)
	received := time.Now()
	for i, cmd := range cmds {
		// send1.lua and sendbatch.lua return Redis's clock after the
		// results when they read it for the producer.
		if res, n := record(cmd, inv[i]); len(res) > n {
			p.clk.observe(res[n], sent, received)
		}
		if firstErr == nil {
			firstErr = cmd.Err()
		}
	}
	return firstErr
}

// sendCall returns one script call of groups: send1.lua for one message
// without options (a single send: most of what sendbatch.lua costs Redis
// is its general path), else sendbatch.lua. A unique send (WithUniqueFor)
// and a send to a topic with an event log take sendbatch.lua, so
// send1.lua's lean path stays as it is. send1.lua gets the envelope ready
// made, its first-send time from the producer's estimate of Redis's
// clock (sendClock), or asks for Redis's own when there is none (and on a
// cluster, whose nodes' clocks differ).
func (p *Producer) sendCall(groups []slotCall) scripts.Call {
	if len(groups) == 1 && len(groups[0].batch) == 1 && len(groups[0].batch[0].opts) == 0 && groups[0].batch[0].unique == 0 && groups[0].events == 0 {
		g, b := groups[0], groups[0].batch[0]
		typ := int(g.topic.Type())
		ms, fresh := p.clk.ms()
		arg := typ
		// On a cluster each node has its own clock: the script stamps it.
		if !fresh || !p.merged {
			arg += scripts.Send1Stamp
		}
		return scripts.Call{
			Script: scripts.Send1,
			Keys:   []string{g.keys.Store, g.keys.Prepare, g.keys.Msg, g.keys.Wake, g.keys.Delayed},
			Args:   []any{p.wakeCmd, arg, b.id, b.score, scripts.SendEnvelope(typ, ms, b.score, b.nonce, nil, b.body)},
		}
	}
	// Likewise sendbatch.lua's groups come packed while the estimate is
	// fresh on a single node (a batch's new messages then cost the script
	// no packing); there every call returns Redis's clock (the script reads
	// it anyway), which keeps the estimate fresh and tightens it: a first
	// reply may have taken long (a NOSCRIPT refusal and its resend).
	ms, fresh := p.clk.ms()
	pack, ask := p.merged && fresh, p.merged
	keys, args := sendBatchArgs(p.wakeCmd, p.prefix, groups, ms, pack, ask)
	return scripts.Call{Script: scripts.SendBatch, Keys: keys, Args: args}
}

// packMin is the fewest messages of a group that come packed. Packing
// moves work from Redis to the one goroutine that flushes, worth it for a
// batch (Redis is its bound) but not for the small groups of concurrent
// single sends, whose flushes are on every sender's path (measured: -5 %
// for 32 goroutines sending one message each when those were packed too).
const packMin = 8

// sendBatchArgs returns the KEYS and ARGV of one sendbatch.lua call. With
// pack, groups of packMin messages or more, other than range-merge ones,
// carry each message's envelope, first sent at ms; with clock, the call
// returns Redis's clock.
func sendBatchArgs(wakeCmd, prefix string, groups []slotCall, ms int64, pack, clock bool) ([]string, []any) {
	keys := make([]string, 0, 5*len(groups))
	args := make([]any, 0, 1+2*len(groups))
	args = append(args, wakeCmd)
	// A group whose messages carry options says so in its type (+4) and
	// gives each message an options argument; one with unique sends (+8)
	// names the slot's unique keys and gives each message its window; one
	// of a topic with an event log (+16) names the slot's log and gives
	// its length in its header. A group without any pays nothing for them.
	withOpts := make([]bool, len(groups))
	withUniq := make([]bool, len(groups))
	packed := make([]bool, len(groups))
	for i, g := range groups {
		keys = append(keys, g.keys.Store, g.keys.Prepare, g.keys.Msg, g.keys.Wake, g.keys.Delayed)
		typ := int(g.topic.Type())
		if pack && len(g.batch) >= packMin && g.topic.Type() != topic.RangeMerge {
			packed[i] = true
			typ += scripts.SendBatchPacked
		}
		if clock && i == 0 {
			typ += scripts.SendBatchClock
		}
		for _, b := range g.batch {
			withOpts[i] = withOpts[i] || len(b.opts) > 0
			withUniq[i] = withUniq[i] || b.unique > 0
		}
		if withOpts[i] {
			typ += 4
		}
		if withUniq[i] {
			typ += 8
			u := keyspace.UniqueKeysFor(prefix, g.topic, g.batch[0].slot)
			keys = append(keys, u.Until, u.Nonce)
		}
		if g.events > 0 {
			typ += 16
			keys = append(keys, keyspace.LifeKeysFor(prefix, g.topic.Name(), g.batch[0].slot).Events)
			args = append(args, typ, len(g.batch), g.events)
			continue
		}
		args = append(args, typ, len(g.batch))
	}
	for i, g := range groups {
		for _, b := range g.batch {
			args = append(args, b.id, b.score, b.nonce)
			if withUniq[i] {
				args = append(args, b.unique)
			}
			if withOpts[i] {
				args = append(args, b.opts)
			}
			if packed[i] {
				args = append(args, scripts.SendEnvelope(int(g.topic.Type()), ms, b.score, b.nonce, b.opts, b.body))
				continue
			}
			args = append(args, b.body)
		}
	}
	return keys, args
}

// gsendCall returns the KEYS and ARGV of one gsend.lua call.
func (p *Producer) gsendCall(groups []slotCall) ([]string, []any) {
	gs := make([]scripts.GSendGroup, len(groups))
	for i, g := range groups {
		slot := g.batch[0].slot
		gk := keyspace.GroupKeysFor(p.prefix, g.topic, slot)
		gs[i] = scripts.GSendGroup{Store: g.keys.Store, Prepare: g.keys.Prepare, Msg: g.keys.Msg, Wake: g.keys.Wake,
			Delayed: g.keys.Delayed, Queue: gk.Queue, Turn: gk.Turn, Type: int(g.topic.Type()), Events: g.events}
		if g.events > 0 {
			gs[i].EventLog = keyspace.LifeKeysFor(p.prefix, g.topic.Name(), slot).Events
		}
		for _, b := range g.batch {
			if b.unique > 0 && gs[i].Uniq == "" {
				// Only a group with unique sends names (and builds) the keys.
				u := keyspace.UniqueKeysFor(p.prefix, g.topic, slot)
				gs[i].Uniq, gs[i].UniqNonce = u.Until, u.Nonce
			}
			gs[i].Msgs = append(gs[i].Msgs, scripts.GSendMsg{ID: b.id, Score: b.scoreText(), Nonce: strconv.FormatUint(b.nonce, 10), Unique: b.unique, Opts: b.opts, Body: b.body})
		}
	}
	return scripts.GSendArgs(p.wakeCmd, gs)
}

// resRefused is the scripts' result for a unique send refused as a
// duplicate (lib.lua's uniq_claim).
const resRefused = -1

// record sets each message's result, or its error: its call's, or
// ErrDuplicate for a refused unique send. It returns the call's reply (nil
// when it failed) and how many messages the call carried.
func record(cmd *redis.Cmd, groups []slotCall) ([]int64, int) {
	res, err := cmd.Int64Slice()
	i := 0
	for _, g := range groups {
		for _, b := range g.batch {
			switch {
			case err != nil:
				b.err = err
			case i < len(res) && res[i] == resRefused:
				b.err = ErrDuplicate
			case i < len(res):
				b.res = SendResult(res[i])
			}
			i++
		}
	}
	return res, i
}
