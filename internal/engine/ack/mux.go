// Package ack runs the acks of a client's topics in group-committed rounds
// (Mux): one ack.lua call per round where the keys allow, whatever topic
// each ack is of.
package ack

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Mux group-commits the acks of every topic of a client:
// pushed deliveries (engine.ackAsync), pulled ones (Delivery.Ack) and acks
// by id (rmq.Client.AckByID). An ack that finds a free round slot starts a
// round at once; acks arriving while RoundsInFlight rounds are under way
// queue up and ride the next one together, whatever their topic. A round
// is one ack.lua call on a single node, naming every slot group of every
// topic it carries; on a cluster, and for a slot fenced by its owner epoch
// (ZooKeeper mode), one call per slot, pipelined. So a wave across 1,000
// topics pays a few ack calls, not 1,000.
//
// A pulled ack or an ack by id that finds a round slot free runs its round
// on its own goroutine, and returns once its own ack ran. The rounds of
// pushed acks (queued without waiting: engine.ackAsync) run on the mux's
// goroutine, which the hub runs while it is started (groupcommit.Serve),
// so a handler's goroutine never runs other deliveries' rounds or their
// observers. An ack works whether or not the hub was started or is closed
// already (an ack by id before Start, a pulled delivery acked after
// Close): callers then run the rounds themselves.
type Mux struct {
	rdb     redis.UniversalClient
	fetches *fetchmux.Mux // the client's fetches, which go to Redis first
	single  bool          // a *redis.Client: unfenced groups share one call
	wakeCmd string        // ack.lua's ARGV[1], the same for every topic of rdb
	g       *groupcommit.Group[*Req]

	// For tests: Rounds started, script Calls made.
	Rounds atomic.Int64
	Calls  atomic.Int64
}

// RoundsInFlight is how many ack rounds of one client may be under way
// at once: one sending while the next fills.
const RoundsInFlight = 2

// ackDeferMax bounds how long an ack round waits for queued fetches to go
// first (fetchmux.Mux.WaitQueued).
const ackDeferMax = 25 * time.Millisecond

// Req is one ack: a delivery by its token, or whatever delivery of an id
// is current (token -1).
type Req struct {
	// Keys are the slot's group in ack.lua's order: store, prepare, msg,
	// wake, delayed (a time-based topic's store again), dead.
	Keys [6]string
	// Flow: the slot's group keys and the topic's tflow (ack.lua's four
	// more keys), when the topic is under flow control (flow/state.go).
	Flow    [4]string
	HasFlow bool
	// Life: the slot's life keys (keyspace.LifeKeys.Slice), when the
	// ack records anything of the message's life: the topic retains
	// (Retention, ms), keeps an event log (Events: its length), or
	// Result is set. Then nobody waiting costs one HLEN.
	Life      [6]string
	HasLife   bool
	Retention int64
	Events    int64
	Result    []byte
	ID        string
	Token     int64
	// Merge: the slot may share a call with other slots (a single node,
	// no fencing). EpochKey, when set, fences the call with Epoch.
	Merge    bool
	EpochKey string
	Epoch    int64
	// Bound is how long the round may wait for Redis on this ack's behalf.
	Bound time.Duration

	// Set by the round.
	Code int64 // ack.lua's answer: Done, Gone or Refused
	Err  error // the call failed
}

// SlotKeys are the keys of an ack of slot keys k (Req.Keys) of a topic
// that is timeBased or not. A time-based topic has no delayed set: its
// store key is named again, and ack.lua then reads no delayed set.
func SlotKeys(k keyspace.Keys, timeBased bool) [6]string {
	delayed := k.Delayed
	if timeBased {
		delayed = k.Store
	}
	return [6]string{k.Store, k.Prepare, k.Msg, k.Wake, delayed, k.Dead}
}

// Refused reports whether ack.lua refused the ack: the delivery is no
// longer current. "Gone" counts as acked (see Gone).
func (r *Req) Refused() bool { return r.Code != Done && r.Code != Gone }

// ackGroupKey tells the calls' slot groups apart: acks of one slot with
// the same fencing share a group.
type ackGroupKey struct {
	prepare  string
	epochKey string
	epoch    int64
	life     bool
}

// New returns the ack rounds of a client's Redis client rdb; fetches, when
// not nil, are its fetches, which a round lets go first.
func New(rdb redis.UniversalClient, fetches *fetchmux.Mux) *Mux {
	_, single := rdb.(*redis.Client)
	m := &Mux{rdb: rdb, fetches: fetches, single: single, wakeCmd: scripts.WakeCommand(rdb)}
	m.g = groupcommit.New(RoundsInFlight, m.round, nil)
	return m
}

// Run runs the rounds of pushed acks until ctx ends; it runs what is still
// queued before it returns.
func (m *Mux) Run(ctx context.Context) { m.g.Serve(ctx) }

// Do runs r in the current or next round. It returns ctx's error if ctx
// ends first (r may still run later, as after any timeout), else the
// error of r's call; r.Code holds ack.lua's answer. A ctx done already
// sends nothing, as a direct call would not.
func (m *Mux) Do(ctx context.Context, r *Req) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.g.Do(ctx, r); err != nil {
		return err
	}
	return r.Err
}

// GoDo queues r for the current or next round and returns; then runs once
// r's round ran (r.Err and r.Code are set), on the goroutine that ran it:
// the mux's own while the hub runs.
func (m *Mux) GoDo(r *Req, then func()) {
	m.g.Go(context.Background(), r, then)
}

// round acks a batch: the groups that may merge in one call, the others one
// call each, all pipelined (scripts.RunAll).
func (m *Mux) round(ctx context.Context, batch []*Req) {
	m.Rounds.Add(1)
	// The round's deadline bounds every ack it carries (engine.finish): the
	// longest any of them asked for.
	var bound time.Duration
	for _, r := range batch {
		bound = max(bound, r.Bound)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if m.fetches != nil {
		m.fetches.WaitQueued(ctx, min(ackDeferMax, bound/2))
	}

	var groups [][]*Req
	at := map[ackGroupKey]int{}
	for _, r := range batch {
		k := ackGroupKey{prepare: r.Keys[1], epochKey: r.EpochKey, epoch: r.Epoch, life: r.HasLife}
		i, seen := at[k]
		if !seen {
			i = len(groups)
			at[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	// calls[i] lists the groups of call i.
	var calls [][][]*Req
	var merged [][]*Req
	for _, g := range groups {
		if m.single && g[0].Merge && g[0].EpochKey == "" {
			merged = append(merged, g)
		} else {
			calls = append(calls, [][]*Req{g})
		}
	}
	if len(merged) > 0 {
		calls = append(calls, merged)
	}
	m.Calls.Add(int64(len(calls)))
	sc := make([]scripts.Call, len(calls))
	for i, gs := range calls {
		keys, args := m.ackCall(gs)
		sc[i] = scripts.Call{Script: scripts.Ack, Keys: keys, Args: args}
	}
	for i, cmd := range scripts.RunAll(ctx, m.rdb, sc) {
		res, err := cmd.Int64Slice()
		k := 0
		for _, g := range calls[i] {
			for _, r := range g {
				switch {
				case err != nil:
					r.Err = err
				case k < len(res):
					r.Code = res[k]
				default:
					r.Code = Refused
				}
				k++
			}
		}
	}
}

// ackCall returns the KEYS and ARGV of one ack.lua call for the acks of
// the given slot groups, which may be of several topics (a single node);
// with an owner epoch (ZooKeeper mode), one group, fenced by it. ARGV[1],
// the wake command, is the client's, the same for every topic.
func (m *Mux) ackCall(groups [][]*Req) ([]string, []any) {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	keys := make([]string, 0, 16*len(groups)+1)
	args := make([]any, 0, 2+len(groups)+2*n)
	args = append(args, m.wakeCmd)
	for _, g := range groups {
		keys = append(keys, g[0].Keys[:]...)
		c := len(g)
		if g[0].HasFlow {
			// Under flow control: four more keys, a negative count.
			keys = append(keys, g[0].Flow[:]...)
			c = -c
		}
		if g[0].HasLife {
			// A life group: six more keys, a count ending in "L".
			keys = append(keys, g[0].Life[:]...)
			args = append(args, strconv.Itoa(c)+"L")
			continue
		}
		args = append(args, c)
	}
	for _, g := range groups {
		if r := g[0]; r.HasLife {
			args = append(args, r.Retention, r.Events)
		}
		for _, r := range g {
			args = append(args, r.ID, r.Token)
			if r.HasLife {
				args = append(args, r.Result)
			}
		}
	}
	if r := groups[0][0]; r.EpochKey != "" {
		keys, args = append(keys, r.EpochKey), append(args, r.Epoch)
	}
	return keys, args
}

// Ack results, as ack.lua returns them.
const (
	Refused = 0
	Done    = 1
	// Gone: refused, and the id is nowhere: what a resent ack whose
	// first run succeeded sees (go-redis resends after a lost reply), so
	// it counts as acked (see ack.lua).
	Gone = 2
)

// Queued returns how many acks queue for a round (tests).
func (m *Mux) Queued() int { return m.g.Queued() }
