// Package fetchmux group-commits the fetches of a client's topics on a
// single node (Mux) and keeps the client's estimate of Redis's clock from
// their replies.
package fetchmux

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Mux group-commits the fetches of the client's topics through
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
// (the engine's merged). On a cluster or in ZooKeeper mode each engine still
// calls per slot (its own fetch calls).
//
// The mux also keeps the client's estimate of Redis's clock (clock.RedisClock):
// every call's reply tells Redis's time within the interval the call was
// under way, and the tightest interval seen gives the estimate the
// fetchers sleep by, not the last (a reply of a large fetch arrives
// milliseconds after Redis read its clock).
type Mux struct {
	rdb redis.UniversalClient
	// single: the hub's client is one node, whose clock every reply reads.
	single bool
	// Clock is the client's estimate of Redis's clock.
	Clock clock.RedisClock
	g     *groupcommit.Group[*muxFetch]

	// holding counts the holder's rounds under way (internal/engine/hold): a wave
	// handed over at its instant, which acks wait for as for fetches;
	// holdIdle, when not nil, is closed once it is back at zero.
	holdMu   sync.Mutex
	holding  int
	holdIdle chan struct{}

	// Rounds and Fetches count the rounds run and the fetches they
	// carried (tests check that fetches merge).
	Rounds  atomic.Int64
	Fetches atomic.Int64
	// lastProbe is when ProbeClock last read Redis's clock (UnixNano).
	lastProbe atomic.Int64
	// RoundHook, when not nil, is called as each round starts with its
	// size (tests).
	RoundHook func(n int)
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

// New returns the mux of a client's Redis client rdb.
func New(rdb redis.UniversalClient) *Mux {
	_, single := rdb.(*redis.Client)
	m := &Mux{rdb: rdb, single: single}
	m.g = groupcommit.New(fetchRoundsInFlight, m.run, func(queued []*muxFetch) int {
		return min(len(queued), maxRoundSections)
	})
	return m
}

// Serves reports whether an engine's fetches go through the mux: they may
// share a call (one node, no fencing: merged) and the engine calls the
// client's Redis client (rdb).
func (m *Mux) Serves(merged bool, rdb redis.UniversalClient) bool {
	return m.single && merged && rdb == m.rdb
}

// SingleNode reports whether the client is one node and rdb is its Redis
// client: the clock estimate is then rdb's.
func (m *Mux) SingleNode(rdb redis.UniversalClient) bool {
	return m.single && rdb == m.rdb
}

// Queued returns how many fetches queue for a round (tests).
func (m *Mux) Queued() int { return m.g.Queued() }

// Fetch runs call in the current or next round and returns its reply and
// when the round was sent and answered. It returns ctx's error, without
// running call, when ctx ends before a round took it.
func (m *Mux) Fetch(ctx context.Context, call scripts.FetchCall) (scripts.FetchReply, time.Time, time.Time, error) {
	f := &muxFetch{call: call}
	if err := m.g.DoUnlessDone(ctx, f); err != nil {
		return scripts.FetchReply{}, time.Time{}, time.Time{}, err
	}
	return f.reply, f.sent, f.received, f.err
}

// WaitQueued returns once no fetch queues for a round or runs and no
// holder round is under way, or after at most most, or when ctx ends.
// Fetches queue only while Redis is the bottleneck (both rounds in
// flight): a wave coming due; and the rounds in flight are the wave too
// (an ack sent now would run before the fetches that reach Redis after
// it). Ack rounds wait here so that Redis runs the fetches
// of a wave first: an ack only frees a message Redis already delivered,
// and every ack of the wave then rides fewer, larger rounds, while a fetch
// is what lateness waits for.
func (m *Mux) WaitQueued(ctx context.Context, most time.Duration) {
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

// HoldRound marks a holder round under way (begin true) or ended.
func (m *Mux) HoldRound(begin bool) {
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
func (m *Mux) holdingIdle() <-chan struct{} {
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
func (m *Mux) run(ctx context.Context, batch []*muxFetch) {
	m.Rounds.Add(1)
	m.Fetches.Add(int64(len(batch)))
	if m.RoundHook != nil {
		m.RoundHook(len(batch))
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
	vals, err := scripts.Fetch.Run(ctx, m.rdb, keys, args...).Slice()
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

// probeSlack is the slack above which a fetcher about to sleep until a due
// time less than ProbeHorizon away first reads Redis's clock (ProbeClock);
// probeEvery spaces the reads, so a client costs Redis at most a few a
// second, and only while something comes due soon.
const (
	probeSlack   = 500 * time.Microsecond
	ProbeHorizon = 2 * time.Second
	probeEvery   = 100 * time.Millisecond
)

// ProbeClock reads Redis's clock once (TIME) when the estimate is looser
// than probeSlack, no other read is under way and none ran in the last
// probeEvery: a client whose replies all came slowly (a start-up, a large
// fetch) would otherwise wake its fetchers late by as much. It reports
// whether it read.
func (m *Mux) ProbeClock(ctx context.Context) bool {
	if !m.single {
		return false
	}
	if _, slack, ok := m.Clock.Estimate(); ok && slack <= probeSlack {
		return false
	}
	now := time.Now()
	last := m.lastProbe.Load()
	if now.UnixNano()-last < int64(probeEvery) || !m.lastProbe.CompareAndSwap(last, now.UnixNano()) {
		return false
	}
	t, err := m.rdb.Time(ctx).Result()
	if err != nil {
		return false
	}
	m.Clock.Observe(t.UnixMicro(), now, time.Now())
	return true
}
