package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// ackMux group-commits the acks of every topic of a client (issue 15):
// pushed deliveries (engine.ackAsync), pulled ones (Delivery.Ack) and acks
// by id (rmq.Client.AckByID). An ack that finds a free round slot starts a
// round at once; acks arriving while ackRoundsInFlight rounds are under way
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
type ackMux struct {
	rdb     redis.UniversalClient
	fetches *callMux // the client's fetches, which go to Redis first
	single  bool     // a *redis.Client: unfenced groups share one call
	wakeCmd string   // ack.lua's ARGV[1], the same for every topic of rdb
	g       *groupcommit.Group[*ackReq]

	// For tests: rounds started, script calls made.
	rounds atomic.Int64
	calls  atomic.Int64
}

// ackRoundsInFlight is how many ack rounds of one client may be under way
// at once: one sending while the next fills.
const ackRoundsInFlight = 2

// ackDeferMax bounds how long an ack round waits for queued fetches to go
// first (callMux.waitQueued).
const ackDeferMax = 25 * time.Millisecond

// ackReq is one ack: a delivery by its token, or whatever delivery of an id
// is current (token -1).
type ackReq struct {
	// keys are the slot's group in ack.lua's order: store, prepare, msg,
	// wake, delayed (a time-based topic's store again), dead.
	keys [6]string
	// flow: the slot's group keys and the topic's tflow (ack.lua's four
	// more keys), when the topic is under flow control (flow.go).
	flow    [4]string
	hasFlow bool
	id      string
	token   int64
	// merge: the slot may share a call with other slots (a single node,
	// no fencing). epochKey, when set, fences the call with epoch.
	merge    bool
	epochKey string
	epoch    int64
	// bound is how long the round may wait for Redis on this ack's behalf.
	bound time.Duration

	// Set by the round.
	code int64 // ack.lua's answer: ackDone, ackGone or ackRefused
	err  error // the call failed
}

// refused reports whether ack.lua refused the ack: the delivery is no
// longer current. "Gone" counts as acked (see ackGone).
func (r *ackReq) refused() bool { return r.code != ackDone && r.code != ackGone }

// ackGroupKey tells the calls' slot groups apart: acks of one slot with
// the same fencing share a group.
type ackGroupKey struct {
	prepare  string
	epochKey string
	epoch    int64
}

func newAckMux(h *Hub) *ackMux {
	_, single := h.rdb.(*redis.Client)
	m := &ackMux{rdb: h.rdb, fetches: h.calls, single: single, wakeCmd: scripts.WakeCommand(h.rdb)}
	m.g = groupcommit.New(ackRoundsInFlight, m.round, nil)
	return m
}

// run runs the rounds of pushed acks until ctx ends; it runs what is still
// queued before it returns.
func (m *ackMux) run(ctx context.Context) { m.g.Serve(ctx) }

// do runs r in the current or next round. It returns ctx's error if ctx
// ends first (r may still run later, as after any timeout), else the
// error of r's call; r.code holds ack.lua's answer. A ctx done already
// sends nothing, as a direct call would not.
func (m *ackMux) do(ctx context.Context, r *ackReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.g.Do(ctx, r); err != nil {
		return err
	}
	return r.err
}

// goDo queues r for the current or next round and returns; then runs once
// r's round ran (r.err and r.code are set), on the goroutine that ran it:
// the mux's own while the hub runs.
func (m *ackMux) goDo(r *ackReq, then func()) {
	m.g.Go(context.Background(), r, then)
}

// round acks a batch: the groups that may merge in one call, the others one
// call each, all pipelined (scripts.RunAll).
func (m *ackMux) round(ctx context.Context, batch []*ackReq) {
	m.rounds.Add(1)
	// The round's deadline bounds every ack it carries (engine.finish): the
	// longest any of them asked for.
	var bound time.Duration
	for _, r := range batch {
		bound = max(bound, r.bound)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if m.fetches != nil {
		m.fetches.waitQueued(ctx, min(ackDeferMax, bound/2))
	}

	var groups [][]*ackReq
	at := map[ackGroupKey]int{}
	for _, r := range batch {
		k := ackGroupKey{prepare: r.keys[1], epochKey: r.epochKey, epoch: r.epoch}
		i, seen := at[k]
		if !seen {
			i = len(groups)
			at[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	// calls[i] lists the groups of call i.
	var calls [][][]*ackReq
	var merged [][]*ackReq
	for _, g := range groups {
		if m.single && g[0].merge && g[0].epochKey == "" {
			merged = append(merged, g)
		} else {
			calls = append(calls, [][]*ackReq{g})
		}
	}
	if len(merged) > 0 {
		calls = append(calls, merged)
	}
	m.calls.Add(int64(len(calls)))
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
					r.err = err
				case k < len(res):
					r.code = res[k]
				default:
					r.code = ackRefused
				}
				k++
			}
		}
	}
}

// AckByID implements rmq.Client.AckByID: it acks whatever delivery of id
// is current in slot of t (keys under prefix), unfenced, in the client's
// ack rounds, and reports whether one was acked. An id that is nowhere
// (unknown, or acked already) and one whose delivery was dead-lettered are
// both false.
func (h *Hub) AckByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) (bool, error) {
	k := slots.KeysFor(prefix, t, slot)
	delayed := k.Delayed
	if t.Type().TimeBased() {
		delayed = k.Store
	}
	// A round waits for Redis at most the longest bound of its acks: a
	// caller's long ctx must not stretch the round of pushed acks sharing
	// it past a prepare timeout (their leases are kept meanwhile).
	bound := consumer.DefaultPrepareTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl), 0))
	}
	r := &ackReq{keys: [6]string{k.Store, k.Prepare, k.Msg, k.Wake, delayed, k.Dead}, id: id, token: -1, merge: true, bound: bound}
	if e := h.flowEngine(prefix, t.Name()); e != nil {
		r.flow, r.hasFlow = e.endFlowKeys(slot)
	}
	if err := h.acks.do(ctx, r); err != nil {
		return false, err
	}
	if r.code == ackDone {
		h.endedByID(ctx, prefix, t, slot, id)
	}
	return r.code == ackDone, nil
}
