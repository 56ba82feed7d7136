package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/scripts"
)

// callMux group-commits the fetches of the client's topics through
// internal/groupcommit, the mechanism acks and sends use too. A fetch that
// finds a round slot free goes to Redis at once, alone (no timer, no added
// latency); fetches that arrive while the rounds in flight are busy queue
// up and go together in the next round: on a single node one fetch.lua
// call whose sections are their requests, each taken as if called alone
// (fetch.lua), so a wave due across many topics costs Redis one script run
// and one round trip per round, not one per topic.
//
// A fetch whose caller gives up (its context ends) before a round took it
// leaves the queue and never runs (groupcommit's DoUnlessDone): nothing is
// moved to prepare for a fetcher that is gone. Once a round took it, the
// caller waits for the round and dispatches what it moved, as a fetch
// under way always did.
//
// Only fetches that may share a call come here: a single node, no fencing
// (engine.merged). On a cluster or in ZooKeeper mode each engine still
// calls per slot (fetchLease).
//
// The mux also keeps the client's estimate of Redis's clock (redisClock):
// every call's reply tells Redis's time within the interval the call was
// under way, and the tightest interval seen gives the estimate the
// fetchers sleep by, not the last (a reply of a large fetch arrives
// milliseconds after Redis read its clock).
type callMux struct {
	h *Hub
	// single: the hub's client is one node, whose clock every reply reads.
	single bool
	clock  redisClock
	g      *groupcommit.Group[*muxFetch]

	// holding counts the holder's rounds under way (hub_hold.go): a wave
	// handed over at its instant, which acks wait for as for fetches;
	// holdIdle, when not nil, is closed once it is back at zero.
	holdMu   sync.Mutex
	holding  int
	holdIdle chan struct{}

	// rounds and fetches count the rounds run and the fetches they
	// carried (tests check that fetches merge).
	rounds  atomic.Int64
	fetches atomic.Int64
	// lastProbe is when probeClock last read Redis's clock (UnixNano).
	lastProbe atomic.Int64
	// roundHook, when not nil, is called as each round starts with its
	// size (tests).
	roundHook func(n int)
}

const (
	// fetchRoundsInFlight is how many rounds may be under way at once: a
	// round's reply is read and dispatched while Redis runs the next.
	fetchRoundsInFlight = 2
	// maxRoundSections bounds the fetches of one round, so a wave across
	// thousands of topics goes in several rounds, the first of them
	// answered (and dispatched) while Redis runs the next.
	maxRoundSections = 128
)

type muxFetch struct {
	call scripts.FetchCall
	// Set by the round that ran it:
	reply          scripts.FetchReply
	err            error
	sent, received time.Time
}

func newCallMux(h *Hub) *callMux {
	_, single := h.rdb.(*redis.Client)
	m := &callMux{h: h, single: single}
	m.g = groupcommit.New(fetchRoundsInFlight, m.run, func(queued []*muxFetch) int {
		return min(len(queued), maxRoundSections)
	})
	return m
}

// serves reports whether c's fetches go through the mux: they may share a
// call (one node, no fencing) and c calls the hub's Redis client.
func (m *callMux) serves(c *Engine) bool {
	return m.single && c.merged && c.rdb == m.h.rdb
}

// fetch runs call in the current or next round and returns its reply and
// when the round was sent and answered. It returns ctx's error, without
// running call, when ctx ends before a round took it.
func (m *callMux) fetch(ctx context.Context, call scripts.FetchCall) (scripts.FetchReply, time.Time, time.Time, error) {
	f := &muxFetch{call: call}
	if err := m.g.DoUnlessDone(ctx, f); err != nil {
		return scripts.FetchReply{}, time.Time{}, time.Time{}, err
	}
	return f.reply, f.sent, f.received, f.err
}

// waitQueued returns once no fetch queues for a round or runs and no
// holder round is under way, or after at most most, or when ctx ends.
// Fetches queue only while Redis is the bottleneck (both rounds in
// flight): a wave coming due; and the rounds in flight are the wave too
// (an ack sent now would run before the fetches that reach Redis after
// it). Ack rounds wait here (ackMux.round) so that Redis runs the fetches
// of a wave first: an ack only frees a message Redis already delivered,
// and every ack of the wave then rides fewer, larger rounds, while a fetch
// is what lateness waits for.
func (m *callMux) waitQueued(ctx context.Context, most time.Duration) {
	var timeout <-chan time.Time
	for {
		var wait <-chan struct{}
		if ch := m.g.Idle(); !closed(ch) {
			wait = ch
		} else if ch := m.holdingIdle(); !closed(ch) {
			wait = ch
		} else {
			return
		}
		if timeout == nil {
			t := time.NewTimer(most)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wait:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// holdRound marks a holder round under way (begin true) or ended.
func (m *callMux) holdRound(begin bool) {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	if begin {
		m.holding++
		return
	}
	m.holding--
	if m.holding == 0 && m.holdIdle != nil {
		close(m.holdIdle)
		m.holdIdle = nil
	}
}

// holdingIdle returns a channel closed once no holder round is under way.
func (m *callMux) holdingIdle() <-chan struct{} {
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	if m.holding == 0 {
		return closedChan
	}
	if m.holdIdle == nil {
		m.holdIdle = make(chan struct{})
	}
	return m.holdIdle
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// run sends one round: a single fetch as it is, several as the sections of
// one call.
func (m *callMux) run(ctx context.Context, batch []*muxFetch) {
	m.rounds.Add(1)
	m.fetches.Add(int64(len(batch)))
	if m.roundHook != nil {
		m.roundHook(len(batch))
	}
	var keys []string
	var args []any
	if len(batch) == 1 {
		keys, args = batch[0].call.Args()
	} else {
		calls := make([]scripts.FetchCall, len(batch))
		for i, f := range batch {
			calls[i] = f.call
		}
		keys, args = scripts.MultiFetchArgs(calls)
	}
	sent := time.Now()
	vals, err := scripts.Fetch.Run(ctx, m.h.rdb, keys, args...).Slice()
	received := time.Now()
	for _, f := range batch {
		f.sent, f.received = sent, received
	}
	if err != nil {
		for _, f := range batch {
			f.err = err
		}
		return
	}
	if len(batch) == 1 {
		batch[0].reply, batch[0].err = scripts.ParseFetchReply(vals)
		return
	}
	replies, errs, err := scripts.ParseMultiFetchReply(vals, len(batch))
	for i, f := range batch {
		switch {
		case err != nil:
			f.err = err
		case errs[i] != nil:
			f.err = fmt.Errorf("rmq: fetch: %w", errs[i])
		default:
			f.reply = replies[i]
		}
	}
}

// redisClock estimates Redis's clock from replies that carry it: Redis
// read its clock at some instant between the call's send and its reply, so
// Redis − local lies in [redisUs − received, redisUs − sent]. The estimate
// is the largest lower bound seen (a lower bound: a fetcher sleeping by it
// wakes a little late, never early), hi the smallest upper bound, until a
// reply's interval does not meet [off, hi] (either clock was set): then it
// starts again from that reply.
type redisClock struct {
	mu      sync.Mutex
	set     bool
	off, hi int64 // µs, Redis − local
}

// observe folds one reply in and returns the estimate (µs).
func (k *redisClock) observe(redisUs int64, sent, received time.Time) int64 {
	lo := redisUs - received.UnixMicro()
	hi := redisUs - sent.UnixMicro()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.set || hi < k.off || lo > k.hi {
		k.off, k.hi, k.set = lo, hi, true
	}
	k.off, k.hi = max(k.off, lo), min(k.hi, hi)
	return k.off
}

// estimate returns the estimate (µs) and how late by it a wake-up may be
// at most (its slack); ok is false before any reply.
func (k *redisClock) estimate() (off int64, slack time.Duration, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.off, time.Duration(k.hi-k.off) * time.Microsecond, k.set
}

// probeSlack is the slack above which a fetcher about to sleep until a due
// time less than probeHorizon away first reads Redis's clock (probeClock);
// probeEvery spaces the reads, so a client costs Redis at most a few a
// second, and only while something comes due soon.
const (
	probeSlack   = 500 * time.Microsecond
	probeHorizon = 2 * time.Second
	probeEvery   = 100 * time.Millisecond
)

// probeClock reads Redis's clock once (TIME) when the estimate is looser
// than probeSlack, no other read is under way and none ran in the last
// probeEvery: a client whose replies all came slowly (a start-up, a large
// fetch) would otherwise wake its fetchers late by as much. It reports
// whether it read.
func (m *callMux) probeClock(ctx context.Context) bool {
	if !m.single {
		return false
	}
	if _, slack, ok := m.clock.estimate(); ok && slack <= probeSlack {
		return false
	}
	now := time.Now()
	last := m.lastProbe.Load()
	if now.UnixNano()-last < int64(probeEvery) || !m.lastProbe.CompareAndSwap(last, now.UnixNano()) {
		return false
	}
	t, err := m.h.rdb.Time(ctx).Result()
	if err != nil {
		return false
	}
	m.clock.observe(t.UnixMicro(), now, time.Now())
	return true
}

// syncClock sets c's clock to the client's estimate (single node).
func (c *Engine) syncClock() {
	m := c.hub.calls
	if !m.single || c.rdb != m.h.rdb {
		return
	}
	if off, _, ok := m.clock.estimate(); ok {
		now := time.Now()
		c.clock.observe(now.UnixMicro()+off, now)
	}
}
