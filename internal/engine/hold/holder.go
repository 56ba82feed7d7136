// Package hold is the client's holder (Holder): the messages lookahead
// fetched shortly before their instant, for every topic, in one queue by
// due time, handed over at their instant.
package hold

import (
	"container/heap"
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Holder keeps the messages that lookahead fetches took shortly before
// their instant (consumer.WithLookahead), for every topic of the client,
// in one queue by due time, and hands them over at their instant. A wave
// due at one instant across many topics is thus fetched before it, by the
// topics' fetchers in the hub's shared rounds, and handed over by one
// goroutine: one confirm.lua call per round for all of them (which also
// makes sure each is still the client's and due by Redis's clock), then a
// handler goroutine each. Only engines whose fetches go through the hub's
// fetchmux.Mux take messages ahead (a single node, no fencing): the confirm
// call names slots of many topics.
//
// A held message counts as busy in its engine from its fetch, within the
// engine's held budget (heldRoom). Until its instant it counts as waiting
// in store for everyone else (its held token: lib.lua). It leaves the
// queue in one of four ways: handed over (the engine's awaitHandOver, with its
// new token and FetchedAt), dropped (a send or a remove took it back to
// store, or its lease ran out and the sweeper did: confirm.lua answers
// gone), given back to store (its topic is paused, or its engine closes:
// release.lua, no attempt counted), or, when Redis stays away, it stays
// queued and is confirmed once Redis answers: the next call names the
// records of the failed ones (Msg.records), so what one of them handed
// over before its reply was lost is handed over then, not left to its
// lease.
type Holder struct {
	rdb   redis.UniversalClient
	calls *fetchmux.Mux

	mu   sync.Mutex
	q    msgQueue
	seq  uint64
	kick chan struct{} // a new earliest due time, or an engine waits in drop
	// inRound counts each engine's messages in the round under way; drop
	// waits for them (roundDone).
	inRound   map[Engine]int
	roundDone *sync.Cond
	// retryAt delays the next round after a failed one (errWait grows).
	retryAt time.Time
	errWait time.Duration
}

// heldRoundMax bounds the messages of one round, heldCallMax those of one
// confirm call: a round's calls go at once, the first handed over while
// Redis runs the next.
const (
	heldRoundMax = 1024
	heldCallMax  = 128
)

// holdPrepare is how long before an instant the holder takes its messages
// and builds their confirm calls, which are sent at the instant: building
// the calls of a wave across 1,000 topics takes milliseconds.
const holdPrepare = 10 * time.Millisecond

type Msg struct {
	c   Engine
	m   *consumer.Message
	due int64 // ms (the store score the fetch took it from)
	seq uint64
	// ready is closed by the holder once it decided: deliver or not. Its
	// handler goroutine waits for it (the engine's awaitHandOver).
	ready   chan struct{}
	deliver bool
	// records are the record keys (scripts.ConfirmRecordKey) of the
	// confirm calls of this message that failed (the holder's goroutine
	// only): one may have run and handed it over, so the next call names
	// them and hands it over again if so. Cleared once a call answered.
	records []string
}

// Engine is a held message's engine as the holder sees it. The holder
// counts by it, so the same engine must be the same (comparable, equal)
// value for each of its messages.
type Engine interface {
	// Paused reports whether the engine's topic is paused: its messages
	// are given back to store, not handed over.
	Paused() bool
	// Keys are the keys of one slot of the engine's topic.
	Keys(slot int) keyspace.Keys
	// WakeCmd is release.lua's wake command of the engine's client.
	WakeCmd() string
	// Events is the event log of one slot of the engine's topic and the
	// most it keeps (0: the topic logs no events): confirm.lua logs each
	// delivery it hands over there.
	Events(slot int) (key string, max int64)
	Log() *slog.Logger
	// Unhold frees the capacity of n held messages that will not be
	// delivered here.
	Unhold(n int)
}

// NewMsg returns m, of c, fetched ahead of its instant due (ms, the store
// score the fetch took it from), to be held.
func NewMsg(c Engine, m *consumer.Message, due int64) *Msg {
	return &Msg{c: c, m: m, due: due, ready: make(chan struct{})}
}

// Ready is closed once the holder decided x: Deliver tells what.
func (x *Msg) Ready() <-chan struct{} { return x.ready }

// Deliver reports whether x was handed over (after Ready): its Message
// then carries its new token and FetchedAt.
func (x *Msg) Deliver() bool { return x.deliver }

// Message is x's message.
func (x *Msg) Message() *consumer.Message { return x.m }

// heldRecordsMax bounds a message's records: confirm.lua keeps one for a
// minute, so after many failed calls in a row the oldest are gone anyway.
const heldRecordsMax = 8

// decide tells x's waiting handler goroutine whether to deliver it.
func (x *Msg) decide(deliver bool) {
	x.deliver = deliver
	close(x.ready)
}

// msgQueue is a min-heap by due time, then fetch order.
type msgQueue []*Msg

func (q msgQueue) Len() int { return len(q) }
func (q msgQueue) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].seq < q[j].seq
}
func (q msgQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *msgQueue) Push(x any)   { *q = append(*q, x.(*Msg)) }
func (q *msgQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return x
}

// New returns the holder of a client's Redis client rdb, a single node
// whose fetches go through calls.
func New(rdb redis.UniversalClient, calls *fetchmux.Mux) *Holder {
	k := &Holder{rdb: rdb, calls: calls, kick: make(chan struct{}, 1), inRound: map[Engine]int{}}
	k.roundDone = sync.NewCond(&k.mu)
	return k
}

// Add queues xs (already counted as busy and held in their engine).
func (k *Holder) Add(xs []*Msg) {
	if len(xs) == 0 {
		return
	}
	k.mu.Lock()
	first := int64(math.MaxInt64)
	if len(k.q) > 0 {
		first = k.q[0].due
	}
	for _, x := range xs {
		k.seq++
		x.seq = k.seq
		heap.Push(&k.q, x)
	}
	earlier := k.q[0].due < first
	k.mu.Unlock()
	if earlier {
		k.poke()
	}
}

func (k *Holder) poke() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// redisNowUs is the client's lower bound of Redis's clock (µs): handing
// over by it is never early; confirm.lua checks again by Redis's own.
func (k *Holder) redisNowUs() int64 {
	now := time.Now().UnixMicro()
	if off, _, ok := k.calls.Clock.Estimate(); ok {
		return now + off
	}
	return now
}

func (k *Holder) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		k.mu.Lock()
		wait := time.Hour
		var batch []*Msg
		if len(k.q) > 0 {
			nowUs := k.redisNowUs()
			wait = time.Duration(k.q[0].due*1000-nowUs) * time.Microsecond
			if d := time.Until(k.retryAt); d > 0 {
				wait = max(wait, d)
			}
			if wait <= holdPrepare {
				// The messages of the earliest due ms (all that are past it
				// when late): their calls are built before the instant.
				limit := max(k.q[0].due, nowUs/1000)
				for len(k.q) > 0 && k.q[0].due <= limit && len(batch) < heldRoundMax {
					x := heap.Pop(&k.q).(*Msg)
					k.inRound[x.c]++
					batch = append(batch, x)
				}
			}
		}
		k.mu.Unlock()
		if len(batch) > 0 {
			k.round(ctx, batch)
			continue
		}
		timer.Reset(wait - holdPrepare)
		select {
		case <-ctx.Done():
		case <-k.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// round confirms batch and hands over what is the client's to deliver
// (handOver gives back the messages of paused topics).
func (k *Holder) round(ctx context.Context, batch []*Msg) {
	again := k.confirm(ctx, batch)
	k.mu.Lock()
	for _, x := range again {
		heap.Push(&k.q, x)
	}
	for _, x := range batch {
		if k.inRound[x.c]--; k.inRound[x.c] <= 0 {
			delete(k.inRound, x.c)
		}
	}
	k.roundDone.Broadcast()
	k.mu.Unlock()
}

// confirm runs confirm.lua over batch, hands over what it may deliver,
// drops what it may not, and returns what is to be held on (not due by
// Redis's clock, or its call failed). The batch goes in calls of at most
// heldCallMax, all sent at once: each is handed over as its reply arrives
// while Redis runs the next.
func (k *Holder) confirm(ctx context.Context, batch []*Msg) (again []*Msg) {
	type call struct {
		record         string // its record key (confirm.lua)
		order          []*Msg
		keys           []string
		args           []any
		vals           []any
		err            error
		sent, received time.Time
	}
	var calls []*call
	last := int64(0)
	for _, x := range batch {
		last = max(last, x.due)
	}
	// A paused topic's messages go back to store still held: they were
	// never handed over.
	var paused []*Msg
	live := batch[:0:0]
	for _, x := range batch {
		if x.c.Paused() {
			paused = append(paused, x)
		} else {
			live = append(live, x)
		}
	}
	if len(paused) > 0 {
		k.release(ctx, paused)
	}
	batch = live
	for len(batch) > 0 {
		n := min(len(batch), heldCallMax)
		groups, order := heldGroups(batch[:n])
		batch = batch[n:]
		// Built once per call, with the call's nonce: a resend by go-redis
		// after a lost reply carries the same, so its rerun finds the
		// record of the first run (confirm.lua).
		nonce := scripts.ConfirmNonce()
		var records []string
		for _, x := range order {
			for _, rk := range x.records {
				if !slices.Contains(records, rk) {
					records = append(records, rk)
				}
			}
		}
		keys, args := scripts.ConfirmArgsNonce(nonce, groups, records...)
		calls = append(calls, &call{record: scripts.ConfirmRecordKey(groups, nonce), order: order, keys: keys, args: args})
	}
	// Sent at the instant (by the lower bound of Redis's clock): confirm
	// would only answer "not yet" before it.
	k.calls.ProbeClock(ctx)
	k.sleepUntil(ctx, last)
	// From the instant until the calls are handed over, acks wait
	// (fetchmux.Mux.WaitQueued): the listeners' start is what lateness waits
	// for.
	k.calls.HoldRound(true)
	defer k.calls.HoldRound(false)
	// Each call is handed over as its reply arrives, in any order.
	done := make(chan *call, len(calls))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, cl := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { done <- cl }()
			cl.sent = time.Now()
			cl.vals, cl.err = scripts.Confirm.Run(ctx, k.rdb, cl.keys, cl.args...).Slice()
			cl.received = time.Now()
		}()
	}
	for range calls {
		cl := <-done
		var reply scripts.ConfirmReply
		err := cl.err
		if err == nil {
			reply, err = scripts.ParseConfirmReply(cl.vals, len(cl.order))
		}
		if err != nil {
			if ctx.Err() == nil {
				k.failed(err, cl.order[0].c)
			}
			// The call may have run: the next one names its records.
			for _, x := range cl.order {
				if len(x.records) == heldRecordsMax {
					x.records = append(x.records[:0], x.records[1:]...)
				}
				x.records = append(x.records, cl.record)
			}
			again = append(again, cl.order...)
			continue
		}
		for _, x := range cl.order {
			x.records = nil
		}
		k.mu.Lock()
		k.errWait = 0
		k.mu.Unlock()
		k.calls.Clock.Observe(reply.NowUs, cl.sent, cl.received)
		again = append(again, k.handOver(ctx, cl.order, reply)...)
	}
	return again
}

// sleepUntil returns once Redis's clock (its lower bound here) reached
// dueMs, or ctx ended.
func (k *Holder) sleepUntil(ctx context.Context, dueMs int64) {
	d := time.Duration(dueMs*1000-k.redisNowUs()) * time.Microsecond
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handOver acts on one confirm reply for order: starts what it may
// deliver, drops what it may not, and returns what is to be held on.
func (k *Holder) handOver(ctx context.Context, order []*Msg, reply scripts.ConfirmReply) (again []*Msg) {
	delivered := 0
	dropped := map[Engine]int{}
	var back []*Msg
	now := time.Now()
	for i, x := range order {
		switch reply.Codes[i] {
		case scripts.HeldDeliver:
			// The delivery starts now, as it would have when fetched from
			// store at its instant: its token says it was handed over.
			x.m.Token = reply.Tokens[delivered]
			x.m.FetchedAt = now
			delivered++
			if x.c.Paused() {
				// Paused while the call ran: given back, not handed over.
				back = append(back, x)
				continue
			}
			x.decide(true)
		case scripts.HeldNotYet:
			again = append(again, x)
		default: // scripts.HeldGone
			dropped[x.c]++
			x.decide(false)
		}
	}
	for c, n := range dropped {
		c.Unhold(n)
		c.Log().Debug("rmq: held messages not delivered (sent again, removed, or their lease lost)", "count", n)
	}
	if len(back) > 0 {
		k.release(ctx, back)
	}
	return again
}

// failed notes a failed confirm: the next round waits, growing as the
// failures go on (Redis is unreachable or failing).
func (k *Holder) failed(err error, c Engine) {
	k.mu.Lock()
	k.errWait = clock.NextBackoff(k.errWait)
	k.retryAt = time.Now().Add(k.errWait)
	wait := k.errWait
	k.mu.Unlock()
	c.Log().Warn("rmq: confirm held messages failed", "err", err, "retry_in", wait)
}

// release gives batch back to store (release.lua), no attempt counted,
// and frees their engines' capacity. A failed call leaves them in prepare
// until their lease runs out; the sweeper then rolls them back.
func (k *Holder) release(ctx context.Context, batch []*Msg) {
	for len(batch) > 0 {
		n := min(len(batch), heldRoundMax)
		part := batch[:n]
		batch = batch[n:]
		groups, _ := heldGroups(part)
		keys, args := scripts.ReleaseArgs(part[0].c.WakeCmd(), groups)
		if err := scripts.Release.Run(ctx, k.rdb, keys, args...).Err(); err != nil {
			part[0].c.Log().Error("rmq: give held messages back to store", "count", n, "err", err)
		}
		counts := map[Engine]int{}
		for _, x := range part {
			counts[x.c]++
			x.decide(false)
		}
		for c, n := range counts {
			c.Unhold(n)
		}
	}
}

// Drop takes c's messages out of the queue, once the round under way (if
// it holds some of them) has handed them over or back, and gives them back
// to store: c is closing. No message of c is handed over after it returns.
func (k *Holder) Drop(ctx context.Context, c Engine) {
	k.mu.Lock()
	for k.inRound[c] > 0 {
		k.roundDone.Wait()
	}
	var mine []*Msg
	kept := k.q[:0]
	for _, x := range k.q {
		if x.c == c {
			mine = append(mine, x)
		} else {
			kept = append(kept, x)
		}
	}
	for i := len(kept); i < len(k.q); i++ {
		k.q[i] = nil
	}
	k.q = kept
	heap.Init(&k.q)
	k.mu.Unlock()
	if len(mine) > 0 {
		k.release(ctx, mine)
	}
}

// heldGroups groups batch by engine and slot into confirm.lua / release.lua
// groups; order lists the messages in the order of the call's items.
func heldGroups(batch []*Msg) (groups []scripts.HeldGroup, order []*Msg) {
	type gk struct {
		c    Engine
		slot int
	}
	index := map[gk]int{}
	var members [][]*Msg
	for _, x := range batch {
		key := gk{x.c, x.m.Slot}
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			k := x.c.Keys(x.m.Slot)
			ek, emax := x.c.Events(x.m.Slot)
			groups = append(groups, scripts.HeldGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Wake: k.Wake, Events: ek, EventsMax: emax})
			members = append(members, nil)
		}
		groups[i].Items = append(groups[i].Items, scripts.HeldItem{ID: x.m.ID, Token: x.m.Token, Score: x.due})
		members[i] = append(members[i], x)
	}
	for _, ms := range members {
		order = append(order, ms...)
	}
	return groups, order
}
