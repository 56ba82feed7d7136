// Package redisops is the consumer's only door to Redis for its messages:
// fetching (fetch.lua, with a cluster's flow permits first), rollbacks,
// lease extensions and sweeps, each one script run per slot, pipelined
// across slots where a loop would otherwise pay one round trip each. Its
// functions take what they use explicitly: the client, the topic's keys
// and settings (Ops), the ownership's fencing (Owner). The engine's
// acks go through package ack's rounds.
package redisops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Ops is what one topic's calls are made with: its engine's, fixed when
// the engine is made.
type Ops struct {
	RDB     redis.UniversalClient
	Topic   topic.Topic
	Keys    []keyspace.Keys // by slot
	WakeCmd string
	// Merged: one script call may name several slots (a single node, no
	// fencing), so fetches take all their slots in one call.
	Merged bool
	// Pull: the engine fetches only when asked (its deliveries' places
	// are bound at once: flow/permits.go).
	Pull bool
	// Lookahead is how long before their instant a lookahead fetch takes
	// messages (their lease counts it in).
	Lookahead time.Duration
	// LeaseSec is a pushed delivery's lease in whole seconds.
	LeaseSec int64
	// The retries: rollback.lua's and sweep.lua's ARGV.
	MaxRetries  int
	DeadMaxLen  int
	DeadMaxAge  time.Duration
	BackoffArgs []any // the backoff table: its length, then ms by attempt
	// Calls are the client's shared calls (single node) and its estimate
	// of Redis's clock.
	Calls *fetchmux.Mux
	// Owner decides the slots fetched and swept and fences the calls
	// (ZooKeeper mode).
	Owner Owner
	Flow  *flow.State  // the topic's flow control
	Life  *Life        // the topic's life keys and settings (life.go)
	Clock *clock.Clock // the engine's estimate of Redis's clock
	Log   *slog.Logger
	// Expired is told of n messages dropped as expired by a fetch.
	Expired func(n int)
	// Fenced is told that Redis refused a call of slot made with epoch (a
	// stale owner epoch: ZooKeeper mode).
	Fenced func(slot int, epoch int64, op string)
}

// Owner is the ownership's part in the calls (ZooKeeper mode fences them;
// the default owns every slot and fences nothing).
type Owner interface {
	// Fetchable keeps the fetch requests of slots owned here now, each
	// with the epoch to name, and returns the others as skipped results.
	Fetchable(reqs []FetchReq) (run []FetchReq, skipped []FetchResult)
	// Sweepable keeps the slots this engine may sweep, with their epochs.
	Sweepable(slotList []int) (owned []int, epochs []int64)
	// EpochKey is the owner epoch key a fetch of slot names ("" none).
	EpochKey(slot int) string
	// Fence adds the epoch key of slot and epoch to a script call's keys
	// and args; args is not written to in place.
	Fence(slot int, epoch int64, keys []string, args []any) ([]string, []any)
}

// BetterScore reports whether score a is consumed before b in a topic
// that is timeBased or not: the earlier due time, or the higher priority.
func BetterScore(timeBased bool, a, b float64) bool {
	if timeBased {
		return a < b
	}
	return a > b
}

// FetchReq asks one slot of a fetch.
type FetchReq struct {
	Slot  int
	N     int    // the most to take from this slot; 0 only reads its head
	Bound string // "" or the next-best slot's head score (slot-by-slot fetching)
	// Ahead: bound may lie after Redis's clock (a lookahead fetch,
	// fetch.lua's mode 3); set on every request of the fetch.
	Ahead bool
	Epoch int64 // owner epoch (ZooKeeper mode), set by fetch
	// CheckDelayed: move the slot's due delayed entries into store first
	// and report its delayed head (priority topics).
	CheckDelayed bool
}

// FetchResult is what a fetch did on one slot.
type FetchResult struct {
	Slot    int
	NowUs   int64   // Redis clock when the script ran
	Head    float64 // first unblocked score in consume order; -1 empty, -2 all blocked
	Msgs    []*consumer.Message
	Err     error
	Epoch   int64 // owner epoch the fetch named (ZooKeeper mode)
	Skipped bool  // not run: the slot is no longer owned here
	// DelayedHead is the due time (ms) of the slot's earliest delayed
	// entry: -1 none, -3 not looked at.
	DelayedHead float64
	// TopicWait and GroupWait are fetch.lua's (flow control): 0, or the
	// Redis ms from which the topic's rate allows a start again (-1: the
	// topic is at its concurrency limit), and the earliest ms a group held
	// back by its rate may go again.
	TopicWait, GroupWait int64
	// TopicRecheck, with topicWait -1 on a cluster: the Redis ms at which
	// the first lease of the topic's places runs out (flow/permits.go).
	TopicRecheck int64
}

// RunPipelined runs n script calls, pipelined when there are several
// (scripts.RunAll: NOSCRIPT is handled there).
func RunPipelined(ctx context.Context, rdb redis.UniversalClient, n int, at func(i int) scripts.Call) []*redis.Cmd {
	calls := make([]scripts.Call, n)
	for i := range calls {
		calls[i] = at(i)
	}
	return scripts.RunAll(ctx, rdb, calls)
}

// Call is one script call.
func Call(s *redis.Script, keys []string, args []any) scripts.Call {
	return scripts.Call{Script: s, Keys: keys, Args: args}
}

// Fetch moves up to total messages from the requested slots to prepare.
// When the slots can share a script call (o.Merged), that is one call, which
// takes the best messages across them in consume order; otherwise one call
// per slot, pipelined, each taking up to its req.N.
func (c *Ops) Fetch(ctx context.Context, reqs []FetchReq, total int) []FetchResult {
	return c.FetchLease(ctx, reqs, total, c.LeaseSec)
}

// FetchLease is Fetch with a lease of its own (pulls name theirs).
func (c *Ops) FetchLease(ctx context.Context, reqs []FetchReq, total int, lease int64) []FetchResult {
	timeBased := c.Topic.Type().TimeBased()
	c.Flow.EnsureLimits(ctx)
	c.Life.Ensure(ctx)
	fl := c.Flow.FetchFlow()
	// A topic with an event log has the fetch log what it hands over and
	// what it drops as expired, in the call that does it; without one the
	// call names no log.
	events := int64(c.Life.Current().Events)
	group := func(r FetchReq) scripts.FetchGroup {
		k := c.Keys[r.Slot]
		g := scripts.FetchGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: r.N, Delayed: k.Delayed, CheckDelayed: r.CheckDelayed}
		if fl != nil && fl.Grouped {
			gk := c.Flow.GroupKeys(r.Slot)
			g.GQ, g.GOcc, g.GTurn, g.GRate = gk.Queue, gk.Places, gk.Turn, gk.Rate
		}
		if events > 0 {
			g.Events = c.Life.Keys(r.Slot)[2]
		}
		return g
	}
	if c.Merged && (len(reqs) > 1 || c.Calls.Serves(c.Merged, c.RDB)) {
		// Under a flow, never a lookahead (engine.lookaheadMs): limits
		// that changed since the fetch was planned take effect with this
		// call, which then takes only what is due (mode 1 ignores a bound
		// after Redis's clock).
		call := scripts.FetchCall{TimeBased: timeBased, N: total, LeaseSec: lease, Window: MergedWindow(total, len(reqs)), Bound: reqs[0].Bound, Lookahead: reqs[0].Ahead && fl == nil, Flow: fl, Events: events}
		if call.Lookahead {
			// A held message's lease runs from its fetch; its listener's
			// time must not be shortened by the wait for its instant.
			call.LeaseSec += int64((c.Lookahead + time.Second - 1) / time.Second)
		}
		if len(reqs) == 1 {
			// As one slot's call below.
			call.N, call.Window = reqs[0].N, reqs[0].N+4
		}
		for _, r := range reqs {
			call.Groups = append(call.Groups, group(r))
		}
		if c.Calls.Serves(c.Merged, c.RDB) {
			// With the fetches of the client's other topics (fetchmux).
			reply, sent, received, err := c.Calls.Fetch(ctx, call)
			return c.decodeFetch(reqs, reply, err, sent, received)
		}
		keys, args := call.Args()
		sent := time.Now()
		reply, err := ParseFetch(scripts.Fetch.Run(ctx, c.RDB, keys, args...))
		return c.decodeFetch(reqs, reply, err, sent, time.Now())
	}
	// ZooKeeper mode: only owned slots, each naming its term's epoch.
	reqs, skipped := c.Owner.Fetchable(reqs)
	// A cluster's topic-wide limits: permits first (flow/permits.go).
	pm := c.Flow.Permits()
	var g *flow.Grant
	var topicWait, recheck int64
	if pm != nil && pm.Limited() {
		var err error
		if reqs, g, topicWait, recheck, err = c.takePermits(ctx, reqs); err != nil {
			out := make([]FetchResult, 0, len(reqs)+len(skipped))
			for _, r := range reqs {
				out = append(out, FetchResult{Slot: r.Slot, Head: -1, Epoch: r.Epoch, DelayedHead: -3, Err: err})
			}
			return append(out, skipped...)
		}
	}
	sent := time.Now()
	cmds := RunPipelined(ctx, c.RDB, len(reqs), func(i int) scripts.Call {
		r := reqs[i]
		call := scripts.FetchCall{TimeBased: timeBased, N: r.N, LeaseSec: lease, Window: r.N + 4, Bound: r.Bound,
			Groups:   []scripts.FetchGroup{group(r)},
			Flow:     fl,
			EpochKey: c.Owner.EpochKey(r.Slot), Epoch: r.Epoch, Events: events}
		keys, args := call.Args()
		return Call(scripts.Fetch, keys, args)
	})
	received := time.Now()
	out := make([]FetchResult, 0, len(reqs)+len(skipped))
	var moved []*consumer.Message
	for i, cmd := range cmds {
		reply, err := ParseFetch(cmd)
		rs := c.decodeFetch(reqs[i:i+1], reply, err, sent, received)
		for j := range rs {
			moved = append(moved, rs[j].Msgs...)
			if topicWait != 0 {
				rs[j].TopicWait, rs[j].TopicRecheck = topicWait, recheck
			}
		}
		out = append(out, rs...)
	}
	if g != nil {
		pm.Fetched(ctx, *g, moved, lease*1000, c.Pull)
	}
	return append(out, skipped...)
}

// takePermits asks a cluster's permits for what reqs want and cuts reqs
// down to what was granted, best slot first: it returns them, the grant
// (nil when nothing was asked), and the wait and recheck time the permits
// reported (FetchResult.TopicWait, TopicRecheck), moved onto this
// engine's clock as durations from the flow node's own: the two nodes'
// clocks are never compared. A grant that reached the client longer ago
// than permitValidity by the time the fetch is to go is not used (the
// client stalled: its rate starts would bunch up); it goes back whole.
func (c *Ops) takePermits(ctx context.Context, reqs []FetchReq) (out []FetchReq, g *flow.Grant, wait, recheck int64, err error) {
	want := 0
	for _, r := range reqs {
		want += r.N
	}
	if want == 0 {
		return reqs, nil, 0, 0, nil
	}
	r, err := c.Flow.Permits().Take(ctx, want)
	if err != nil {
		return reqs, nil, 0, 0, fmt.Errorf("rmq: permits of %s: %w", c.Topic.Name(), err)
	}
	nowMs := c.Clock.Now().UnixMilli()
	if r.Wait > 0 {
		wait = nowMs + max(r.Wait-r.NowMs, 1)
	} else {
		wait = r.Wait
	}
	if r.Expiry > 0 {
		recheck = nowMs + max(r.Expiry-r.NowMs, 1)
	}
	left := r.Granted
	if l := c.Flow.Current(); l.Rate > 0 && time.Since(r.At) > flow.PermitValidity(l) {
		left = 0
	}
	out = reqs[:0:0]
	for _, q := range reqs {
		q.N = min(q.N, left)
		left -= q.N
		out = append(out, q)
	}
	return out, &r, wait, recheck, nil
}

func ParseFetch(cmd *redis.Cmd) (scripts.FetchReply, error) {
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
func (c *Ops) observeClock(redisUs int64, sent, received time.Time) {
	if redisUs <= 0 {
		return
	}
	if m := c.Calls; m.SingleNode(c.RDB) {
		redisUs = received.UnixMicro() + m.Clock.Observe(redisUs, sent, received)
	}
	c.Clock.Observe(redisUs, received)
}

// MergedWindow is how many entries of each slot a merged fetch reads at a
// time: an even share of the messages wanted and one more. Every entry read
// costs a score formatted by Redis and parsed by Lua; a slot whose share
// runs out is read again in the same call. Twice the share measured about
// 7 % slower (consume, 16 slots, 32 handlers).
func MergedWindow(total, slots int) int {
	return (total+slots-1)/slots + 1
}

// decodeFetch turns a fetch.lua reply for reqs (its groups, in order),
// or the error of its call, into one result per slot. The call was sent at
// sent and answered at received.
func (c *Ops) decodeFetch(reqs []FetchReq, reply scripts.FetchReply, err error, sent, received time.Time) []FetchResult {
	out := make([]FetchResult, len(reqs))
	for i, r := range reqs {
		out[i] = FetchResult{Slot: r.Slot, Head: -1, Epoch: r.Epoch, DelayedHead: -3}
	}
	if err == nil && len(reply.Heads) != len(reqs) {
		err = fmt.Errorf("rmq: fetch: %d heads for %d slots", len(reply.Heads), len(reqs))
	}
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	c.observeClock(reply.NowUs, sent, received)
	for i := range out {
		out[i].NowUs = reply.NowUs
		out[i].Head = reply.Heads[i]
		out[i].TopicWait, out[i].GroupWait = reply.TopicWait, reply.GroupWait
		if i < len(reply.DelayedHeads) {
			out[i].DelayedHead = reply.DelayedHeads[i]
		}
	}
	if reply.Expired > 0 {
		c.Expired(reply.Expired)
		c.Log.Info("rmq: dropped expired messages", "count", reply.Expired)
	}
	for _, f := range reply.Msgs {
		r := &out[f.Group]
		env, err := scripts.DecodeEnvelope([]byte(f.Envelope))
		if err != nil {
			r.Err = fmt.Errorf("rmq: fetch %s: %w", f.ID, err)
			continue
		}
		m := &consumer.Message{
			ID:          f.ID,
			Topic:       c.Topic.Name(),
			Slot:        r.Slot,
			Type:        c.Topic.Type(),
			Body:        env.Body,
			Attempt:     int(f.Token % 1000),
			FirstSentAt: time.UnixMilli(int64(env.FirstSentMs)),
			FetchedAt:   received,
			LastError:   env.LastError,
			Token:       f.Token,
			Epoch:       r.Epoch,
		}
		if c.Topic.Type().TimeBased() {
			m.DueAt = time.UnixMilli(int64(f.Score))
		} else {
			m.Priority = int64(env.OrigScore)
		}
		ApplyJobFields(m, env)
		r.Msgs = append(r.Msgs, m)
	}
	return out
}

// Rollback outcomes, as rollback.lua returns them.
const (
	RollbackStale      = 0
	RollbackSuperseded = 2
	RollbackDead       = 3
	RollbackRetried    = 4
	RollbackExpired    = 5
	RollbackSnoozed    = 6
	// 7: a message held for its instant whose lease ran out before it was
	// handed over (sweep.lua): back in store, no attempt counted. A
	// listener's delivery never gets it (held ones are released, never
	// rolled back), so RollbackOutcome has no case for it.
)

// RollbackItem is one delivery a rollback ends.
type RollbackItem struct {
	ID    string
	Token int64
	Err   string
	Epoch int64  // owner epoch of the delivery (ZooKeeper mode)
	How   string // the handler's directive (RollbackDirective); "" the backoff
}

// Rollback ends items of slot as failed (rollback.lua): retried, or dead
// past their retries.
func (c *Ops) Rollback(ctx context.Context, slot int, items []RollbackItem) ([]int64, error) {
	k := c.Keys[slot]
	args := c.retryArgs()
	for _, it := range items {
		args = append(args, it.ID, it.Token, it.Err, it.How)
	}
	keys := []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}
	keys = append(keys, c.Flow.EndKeys(slot)...)
	lk := c.Life.Keys(slot)
	keys = append(keys, lk[:]...)
	if len(items) > 0 {
		keys, args = c.Owner.Fence(slot, items[0].Epoch, keys, args)
	}
	res, err := scripts.Rollback.Run(ctx, c.RDB, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("rmq: rollback on %s slot %d: %w", c.Topic.Name(), slot, err)
	}
	return res, nil
}

// retryArgs are the ARGV shared by rollback.lua and sweep.lua up to and
// including the event log's length after the backoff table; sweep passes
// its limit, which goes before the table. The calls name the life keys
// (max retries ending in "L"), so retries, deaths and expiries are
// recorded and the waiters of a message that ends hear of it.
func (c *Ops) retryArgs(sweepLimit ...any) []any {
	args := []any{c.WakeCmd, maxRetriesArg(c.MaxRetries), c.deadMaxLenPerSlot(), c.DeadMaxAge.Milliseconds()}
	args = append(args, sweepLimit...)
	args = append(args, c.BackoffArgs...)
	return append(args, c.Life.Current().Events)
}

func (c *Ops) deadMaxLenPerSlot() int {
	if c.DeadMaxLen == 0 {
		return 0
	}
	n := c.Topic.SlotAmount()
	return (c.DeadMaxLen + n - 1) / n
}

// Extend renews the leases of deliveries (of D, whose message msg gives)
// grouped by slot and returns the deliveries whose lease was lost.
func Extend[D any](ctx context.Context, c *Ops, bySlot map[int][]D, msg func(D) *consumer.Message) (lost []D, err error) {
	order := make([]int, 0, len(bySlot))
	for s := range bySlot {
		order = append(order, s)
	}
	lease := c.LeaseSec
	cmds := RunPipelined(ctx, c.RDB, len(order), func(i int) scripts.Call {
		ds := bySlot[order[i]]
		args := make([]any, 0, 1+2*len(ds))
		args = append(args, lease)
		for _, d := range ds {
			args = append(args, msg(d).ID, msg(d).Token)
		}
		keys, args := c.Owner.Fence(order[i], msg(ds[0]).Epoch, []string{c.Keys[order[i]].Prepare}, args)
		return Call(scripts.Extend, keys, args)
	})
	for i, cmd := range cmds {
		res, e := cmd.Int64Slice()
		if scripts.IsFenced(e) {
			// Its handlers are cancelled with ErrFenced by fenced.
			c.Fenced(order[i], msg(bySlot[order[i]][0]).Epoch, "extend")
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

// DeadLease is a message the sweeper moved to the dead queue because its
// last attempt's lease ran out.
type DeadLease struct {
	Slot     int
	ID       string
	Attempts int
}

// Sweep rolls back expired leases on the given slots; it returns how many
// were rolled back, which of them died, and how many expired messages were
// dropped.
func (c *Ops) Sweep(ctx context.Context, slotList []int) (rolled int, dead []DeadLease, expiredN int, err error) {
	args := c.retryArgs(lease.SweepLimit)
	// ZooKeeper mode: only the owner sweeps a slot, naming its epoch.
	slotList, epochs := c.Owner.Sweepable(slotList)
	cmds := RunPipelined(ctx, c.RDB, len(slotList), func(i int) scripts.Call {
		k := c.Keys[slotList[i]]
		keys := append([]string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}, c.Flow.EndKeys(slotList[i])...)
		lk := c.Life.Keys(slotList[i])
		keys = append(keys, lk[:]...)
		keys, args := c.Owner.Fence(slotList[i], epochs[i], keys, args)
		return Call(scripts.Sweep, keys, args)
	})
	for i, cmd := range cmds {
		vals, e := cmd.Slice()
		if scripts.IsFenced(e) {
			c.Fenced(slotList[i], epochs[i], "sweep")
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
				dead = append(dead, DeadLease{Slot: slotList[i], ID: id, Attempts: int(n)})
			}
		}
	}
	return rolled, dead, expiredN, err
}

// KeysOf returns the keys of every slot of t under prefix, by slot.
func KeysOf(prefix string, t topic.Topic) []keyspace.Keys {
	ks := make([]keyspace.Keys, t.SlotAmount())
	for i := range ks {
		ks[i] = keyspace.KeysFor(prefix, t, i)
	}
	return ks
}

// ApplyJobFields copies the per-message options of env into m.
func ApplyJobFields(m *consumer.Message, env scripts.Envelope) {
	o := env.Options
	m.Headers = o.Headers
	m.MaxRetries = -1
	if o.HasMaxRetries {
		m.MaxRetries = o.MaxRetries
	}
	if o.ExpiresAtMs > 0 {
		m.ExpiresAt = time.UnixMilli(o.ExpiresAtMs)
	}
	m.Timeout = time.Duration(o.TimeoutMs) * time.Millisecond
	m.Group = o.Group
}

// RollbackOutcome is the outcome of a delivery that rollback.lua ended
// with code.
func RollbackOutcome(code int64) consumer.Outcome {
	switch code {
	case RollbackRetried:
		return consumer.Retried
	case RollbackDead:
		return consumer.Dead
	case RollbackSuperseded:
		return consumer.Superseded
	case RollbackExpired:
		return consumer.Expired
	case RollbackSnoozed:
		return consumer.Snoozed
	}
	return consumer.Refused
}

// directive is what consumer.SkipRetry, RetryAfter and Snooze errors
// carry: the handler's wish for the rollback.
type directive interface {
	Directive() (kind byte, delay time.Duration)
}

// RollbackDirective returns what rollback.lua is told for a handler's
// error: "" (the backoff), "d", "r<ms>" or "s<ms>". Delays round up to the
// ms: never early.
func RollbackDirective(err error) string {
	var d directive
	if !errors.As(err, &d) {
		return ""
	}
	kind, delay := d.Directive()
	if kind == 'd' {
		return "d"
	}
	ms := int64((max(delay, 0) + time.Millisecond - 1) / time.Millisecond)
	return string(kind) + strconv.FormatInt(ms, 10)
}
