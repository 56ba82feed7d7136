package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
)

// This file is the consumer's only door to Redis: every call is one script
// run per slot, pipelined across slots where a loop would otherwise pay one
// round trip each.

type fetchReq struct {
	slot  int
	n     int    // the most to take from this slot; 0 only reads its head
	bound string // "" or the next-best slot's head score (slot-by-slot fetching)
	// ahead: bound may lie after Redis's clock (a lookahead fetch,
	// fetch.lua's mode 3); set on every request of the fetch.
	ahead bool
	epoch int64 // owner epoch (ZooKeeper mode), set by fetch
	// checkDelayed: move the slot's due delayed entries into store first
	// and report its delayed head (priority topics).
	checkDelayed bool
}

type fetchResult struct {
	slot    int
	nowUs   int64   // Redis clock when the script ran
	head    float64 // first unblocked score in consume order; -1 empty, -2 all blocked
	msgs    []*consumer.Message
	err     error
	epoch   int64 // owner epoch the fetch named (ZooKeeper mode)
	skipped bool  // not run: the slot is no longer owned here
	// delayedHead is the due time (ms) of the slot's earliest delayed
	// entry: -1 none, -3 not looked at.
	delayedHead float64
	// topicWait and groupWait are fetch.lua's (flow control): 0, or the
	// Redis ms from which the topic's rate allows a start again (-1: the
	// topic is at its concurrency limit), and the earliest ms a group held
	// back by its rate may go again.
	topicWait, groupWait int64
	// topicRecheck, with topicWait -1 on a cluster: the Redis ms at which
	// the first lease of the topic's places runs out (flow/permits.go).
	topicRecheck int64
}

// runPipelined runs n script calls, pipelined when there are several
// (scripts.RunAll: NOSCRIPT is handled there).
func (c *Engine) runPipelined(ctx context.Context, n int, at func(i int) scripts.Call) []*redis.Cmd {
	calls := make([]scripts.Call, n)
	for i := range calls {
		calls[i] = at(i)
	}
	return scripts.RunAll(ctx, c.rdb, calls)
}

func scriptCall(s *redis.Script, keys []string, args []any) scripts.Call {
	return scripts.Call{Script: s, Keys: keys, Args: args}
}

// fetch moves up to total messages from the requested slots to prepare.
// When the slots can share a script call (c.merged), that is one call, which
// takes the best messages across them in consume order; otherwise one call
// per slot, pipelined, each taking up to its req.n.
func (c *Engine) fetch(ctx context.Context, reqs []fetchReq, total int) []fetchResult {
	return c.fetchLease(ctx, reqs, total, c.cfg.leaseSeconds())
}

// fetchLease is fetch with a lease of its own (pulls name theirs).
func (c *Engine) fetchLease(ctx context.Context, reqs []fetchReq, total int, lease int64) []fetchResult {
	timeBased := c.topic.Type().TimeBased()
	c.ensureLimits(ctx)
	fl := c.flow.fetchFlow()
	group := func(r fetchReq) scripts.FetchGroup {
		k := c.keys[r.slot]
		g := scripts.FetchGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: r.n, Delayed: k.Delayed, CheckDelayed: r.checkDelayed}
		if fl != nil && fl.Grouped {
			gk := c.flow.gkeys[r.slot]
			g.GQ, g.GOcc, g.GTurn, g.GRate = gk.Queue, gk.Places, gk.Turn, gk.Rate
		}
		return g
	}
	if c.merged && (len(reqs) > 1 || c.hub.calls.Serves(c.merged, c.rdb)) {
		// Under a flow, never a lookahead (engine.lookaheadMs): limits
		// that changed since the fetch was planned take effect with this
		// call, which then takes only what is due (mode 1 ignores a bound
		// after Redis's clock).
		call := scripts.FetchCall{TimeBased: timeBased, N: total, LeaseSec: lease, Window: mergedWindow(total, len(reqs)), Bound: reqs[0].bound, Lookahead: reqs[0].ahead && fl == nil, Flow: fl}
		if call.Lookahead {
			// A held message's lease runs from its fetch; its listener's
			// time must not be shortened by the wait for its instant.
			call.LeaseSec += int64((c.cfg.lookahead + time.Second - 1) / time.Second)
		}
		if len(reqs) == 1 {
			// As one slot's call below.
			call.N, call.Window = reqs[0].n, reqs[0].n+4
		}
		for _, r := range reqs {
			call.Groups = append(call.Groups, group(r))
		}
		if c.hub.calls.Serves(c.merged, c.rdb) {
			// With the fetches of the client's other topics (fetchmux).
			reply, sent, received, err := c.hub.calls.Fetch(ctx, call)
			return c.decodeFetch(reqs, reply, err, sent, received)
		}
		keys, args := call.Args()
		sent := time.Now()
		reply, err := parseFetch(scripts.Fetch.Run(ctx, c.rdb, keys, args...))
		return c.decodeFetch(reqs, reply, err, sent, time.Now())
	}
	// ZooKeeper mode: only owned slots, each naming its term's epoch.
	reqs, skipped := c.own.fetchable(reqs)
	// A cluster's topic-wide limits: permits first (flow/permits.go).
	pm := c.flow.permits
	var g *flow.Grant
	var topicWait, recheck int64
	if pm != nil && pm.Limited() {
		var err error
		if reqs, g, topicWait, recheck, err = c.takePermits(ctx, reqs); err != nil {
			out := make([]fetchResult, 0, len(reqs)+len(skipped))
			for _, r := range reqs {
				out = append(out, fetchResult{slot: r.slot, head: -1, epoch: r.epoch, delayedHead: -3, err: err})
			}
			return append(out, skipped...)
		}
	}
	sent := time.Now()
	cmds := c.runPipelined(ctx, len(reqs), func(i int) scripts.Call {
		r := reqs[i]
		call := scripts.FetchCall{TimeBased: timeBased, N: r.n, LeaseSec: lease, Window: r.n + 4, Bound: r.bound,
			Groups:   []scripts.FetchGroup{group(r)},
			Flow:     fl,
			EpochKey: c.own.epochKey(r.slot), Epoch: r.epoch}
		keys, args := call.Args()
		return scriptCall(scripts.Fetch, keys, args)
	})
	received := time.Now()
	out := make([]fetchResult, 0, len(reqs)+len(skipped))
	var moved []*consumer.Message
	for i, cmd := range cmds {
		reply, err := parseFetch(cmd)
		rs := c.decodeFetch(reqs[i:i+1], reply, err, sent, received)
		for j := range rs {
			moved = append(moved, rs[j].msgs...)
			if topicWait != 0 {
				rs[j].topicWait, rs[j].topicRecheck = topicWait, recheck
			}
		}
		out = append(out, rs...)
	}
	if g != nil {
		pm.Fetched(ctx, *g, moved, lease*1000, c.pull)
	}
	return append(out, skipped...)
}

// takePermits asks a cluster's permits for what reqs want and cuts reqs
// down to what was granted, best slot first: it returns them, the grant
// (nil when nothing was asked), and the wait and recheck time the permits
// reported (fetchResult.topicWait, topicRecheck), moved onto this
// engine's clock as durations from the flow node's own: the two nodes'
// clocks are never compared. A grant that reached the client longer ago
// than permitValidity by the time the fetch is to go is not used (the
// client stalled: its rate starts would bunch up); it goes back whole.
func (c *Engine) takePermits(ctx context.Context, reqs []fetchReq) (out []fetchReq, g *flow.Grant, wait, recheck int64, err error) {
	want := 0
	for _, r := range reqs {
		want += r.n
	}
	if want == 0 {
		return reqs, nil, 0, 0, nil
	}
	r, err := c.flow.permits.Take(ctx, want)
	if err != nil {
		return reqs, nil, 0, 0, fmt.Errorf("rmq: permits of %s: %w", c.topic.Name(), err)
	}
	nowMs := c.clock.Now().UnixMilli()
	if r.Wait > 0 {
		wait = nowMs + max(r.Wait-r.NowMs, 1)
	} else {
		wait = r.Wait
	}
	if r.Expiry > 0 {
		recheck = nowMs + max(r.Expiry-r.NowMs, 1)
	}
	left := r.Granted
	if l := c.flow.current(); l.Rate > 0 && time.Since(r.At) > flow.PermitValidity(l) {
		left = 0
	}
	out = reqs[:0:0]
	for _, q := range reqs {
		q.n = min(q.n, left)
		left -= q.n
		out = append(out, q)
	}
	return out, &r, wait, recheck, nil
}

func parseFetch(cmd *redis.Cmd) (scripts.FetchReply, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return scripts.FetchReply{}, err
	}
	return scripts.ParseFetchReply(vals)
}

// observeClock folds one reading of Redis's clock, taken while a call sent
// at sent and answered at received was under way, into the engine's
// estimate. On a single node the client's tightest estimate is used
// (clock.RedisClock); on a cluster, whose nodes' clocks may differ, the reading
// itself.
func (c *Engine) observeClock(redisUs int64, sent, received time.Time) {
	if redisUs <= 0 {
		return
	}
	if m := c.hub.calls; m.SingleNode(c.rdb) {
		redisUs = received.UnixMicro() + m.Clock.Observe(redisUs, sent, received)
	}
	c.clock.Observe(redisUs, received)
}

// mergedWindow is how many entries of each slot a merged fetch reads at a
// time: an even share of the messages wanted and one more. Every entry read
// costs a score formatted by Redis and parsed by Lua; a slot whose share
// runs out is read again in the same call. Twice the share measured about
// 7 % slower (consume, 16 slots, 32 handlers).
func mergedWindow(total, slots int) int {
	return (total+slots-1)/slots + 1
}

// decodeFetch turns a fetch.lua reply for reqs (its groups, in order),
// or the error of its call, into one result per slot. The call was sent at
// sent and answered at received.
func (c *Engine) decodeFetch(reqs []fetchReq, reply scripts.FetchReply, err error, sent, received time.Time) []fetchResult {
	out := make([]fetchResult, len(reqs))
	for i, r := range reqs {
		out[i] = fetchResult{slot: r.slot, head: -1, epoch: r.epoch, delayedHead: -3}
	}
	if err == nil && len(reply.Heads) != len(reqs) {
		err = fmt.Errorf("rmq: fetch: %d heads for %d slots", len(reply.Heads), len(reqs))
	}
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	c.observeClock(reply.NowUs, sent, received)
	for i := range out {
		out[i].nowUs = reply.NowUs
		out[i].head = reply.Heads[i]
		out[i].topicWait, out[i].groupWait = reply.TopicWait, reply.GroupWait
		if i < len(reply.DelayedHeads) {
			out[i].delayedHead = reply.DelayedHeads[i]
		}
	}
	if reply.Expired > 0 {
		expired(c.cfg.observer, c.topic.Name(), reply.Expired)
		c.log.Info("rmq: dropped expired messages", "count", reply.Expired)
	}
	for _, f := range reply.Msgs {
		r := &out[f.Group]
		env, err := scripts.DecodeEnvelope([]byte(f.Envelope))
		if err != nil {
			r.err = fmt.Errorf("rmq: fetch %s: %w", f.ID, err)
			continue
		}
		m := &consumer.Message{
			ID:          f.ID,
			Topic:       c.topic.Name(),
			Slot:        r.slot,
			Type:        c.topic.Type(),
			Body:        env.Body,
			Attempt:     int(f.Token % 1000),
			FirstSentAt: time.UnixMilli(int64(env.FirstSentMs)),
			FetchedAt:   received,
			LastError:   env.LastError,
			Token:       f.Token,
			Epoch:       r.epoch,
		}
		if c.topic.Type().TimeBased() {
			m.DueAt = time.UnixMilli(int64(f.Score))
		} else {
			m.Priority = int64(env.OrigScore)
		}
		applyJobFields(m, env)
		r.msgs = append(r.msgs, m)
	}
	return out
}

// Rollback outcomes, as rollback.lua returns them.
const (
	rollbackStale      = 0
	rollbackSuperseded = 2
	rollbackDead       = 3
	rollbackRetried    = 4
	rollbackExpired    = 5
	rollbackSnoozed    = 6
	// 7: a message held for its instant whose lease ran out before it was
	// handed over (sweep.lua): back in store, no attempt counted. A
	// listener's delivery never gets it (held ones are released, never
	// rolled back), so rollbackOutcome has no case for it.
)

type rollbackItem struct {
	id    string
	token int64
	err   string
	epoch int64  // owner epoch of the delivery (ZooKeeper mode)
	how   string // the handler's directive (rollbackDirective); "" the backoff
}

func (c *Engine) rollback(ctx context.Context, slot int, items []rollbackItem) ([]int64, error) {
	k := c.keys[slot]
	args := c.retryArgs()
	for _, it := range items {
		args = append(args, it.id, it.token, it.err, it.how)
	}
	keys := []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}
	keys = append(keys, c.endKeys(slot)...)
	if len(items) > 0 {
		keys, args = c.own.fence(slot, items[0].epoch, keys, args)
	}
	res, err := scripts.Rollback.Run(ctx, c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("rmq: rollback on %s slot %d: %w", c.topic.Name(), slot, err)
	}
	return res, nil
}

// retryArgs are the ARGV shared by rollback.lua and sweep.lua up to and
// including the backoff table; sweep passes its limit, which goes before
// the table.
func (c *Engine) retryArgs(sweepLimit ...any) []any {
	args := []any{c.wakeCmd, c.cfg.maxRetries, c.deadMaxLenPerSlot(), c.cfg.deadMaxAge.Milliseconds()}
	args = append(args, sweepLimit...)
	return append(args, c.backoffArgs...)
}

func (c *Engine) deadMaxLenPerSlot() int {
	if c.cfg.deadMaxLen == 0 {
		return 0
	}
	n := c.topic.SlotAmount()
	return (c.cfg.deadMaxLen + n - 1) / n
}

// extend renews the leases of deliveries grouped by slot and returns the
// deliveries whose lease was lost.
func (c *Engine) extend(ctx context.Context, bySlot map[int][]*delivery) (lost []*delivery, err error) {
	order := make([]int, 0, len(bySlot))
	for s := range bySlot {
		order = append(order, s)
	}
	lease := c.cfg.leaseSeconds()
	cmds := c.runPipelined(ctx, len(order), func(i int) scripts.Call {
		ds := bySlot[order[i]]
		args := make([]any, 0, 1+2*len(ds))
		args = append(args, lease)
		for _, d := range ds {
			args = append(args, d.msg.ID, d.msg.Token)
		}
		keys, args := c.own.fence(order[i], ds[0].msg.Epoch, []string{c.keys[order[i]].Prepare}, args)
		return scriptCall(scripts.Extend, keys, args)
	})
	for i, cmd := range cmds {
		res, e := cmd.Int64Slice()
		if scripts.IsFenced(e) {
			// Its handlers are cancelled with ErrFenced by fenced.
			c.fenced(order[i], bySlot[order[i]][0].msg.Epoch, "extend")
			continue
		}
		if e != nil {
			err = e
			continue
		}
		for j, v := range res {
			if v == 0 {
				lost = append(lost, bySlot[order[i]][j])
			}
		}
	}
	return lost, err
}

// deadLease is a message the sweeper moved to the dead queue because its
// last attempt's lease ran out.
type deadLease struct {
	slot     int
	id       string
	attempts int
}

// sweep rolls back expired leases on the given slots; it returns how many
// were rolled back, which of them died, and how many expired messages were
// dropped.
func (c *Engine) sweep(ctx context.Context, slotList []int) (rolled int, dead []deadLease, expiredN int, err error) {
	args := c.retryArgs(lease.SweepLimit)
	// ZooKeeper mode: only the owner sweeps a slot, naming its epoch.
	slotList, epochs := c.own.sweepable(slotList)
	cmds := c.runPipelined(ctx, len(slotList), func(i int) scripts.Call {
		k := c.keys[slotList[i]]
		keys := append([]string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}, c.endKeys(slotList[i])...)
		keys, args := c.own.fence(slotList[i], epochs[i], keys, args)
		return scriptCall(scripts.Sweep, keys, args)
	})
	for i, cmd := range cmds {
		vals, e := cmd.Slice()
		if scripts.IsFenced(e) {
			c.fenced(slotList[i], epochs[i], "sweep")
			continue
		}
		if e != nil {
			err = e
			continue
		}
		// sweep.lua returns { rolled back, of them dead (D), expired,
		// D pairs of id and attempts, ids retried ... }.
		if len(vals) >= 3 {
			r, _ := vals[0].(int64)
			d, _ := vals[1].(int64)
			x, _ := vals[2].(int64)
			rolled += int(r)
			expiredN += int(x)
			for j := 0; j < int(d) && 3+2*j+1 < len(vals); j++ {
				id, _ := vals[3+2*j].(string)
				n, _ := vals[3+2*j+1].(int64)
				dead = append(dead, deadLease{slot: slotList[i], id: id, attempts: int(n)})
			}
		}
	}
	return rolled, dead, expiredN, err
}

func keysOf(prefix string, c *Engine) []slots.Keys {
	ks := make([]slots.Keys, c.topic.SlotAmount())
	for i := range ks {
		ks[i] = slots.KeysFor(prefix, c.topic, i)
	}
	return ks
}

// ackDelayedKey is the delayed key an ack call names for slot keys k: the
// delayed set of a priority topic, the store key again for a time-based
// one, which has none (ack.lua then reads no delayed set).
func (c *Engine) ackDelayedKey(k slots.Keys) string {
	if c.topic.Type().TimeBased() {
		return k.Store
	}
	return k.Delayed
}
