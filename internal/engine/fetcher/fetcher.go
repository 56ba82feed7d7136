// Package fetcher is the one goroutine of an engine that moves messages
// from store to prepare (Fetcher): it keeps every slot's head, plans each
// fetch across slots in consume order (plan.go), heeds the topic's flow
// control (flow.go), and hands what it fetched to its engine, which
// starts the deliveries or holds them for their instant. A client's
// fetchers first look whether their topics hold anything at all, in
// shared rounds (Looks).
package fetcher

import (
	"context"
	"math"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/clock"
	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/scripts"
)

const never = math.MaxInt64

// maxIdle bounds a fetcher's sleep. Wake-ups come by notification and a
// resubscription marks every slot unknown, so this is a safety net, not a poll.
const maxIdle = time.Minute

// blockedRecheck is how soon a slot whose waiting messages are all blocked
// (their id is being handled) is looked at again if the wake-up that the
// end of that delivery publishes is missed.
const blockedRecheck = 5 * time.Second

// slotHead is what the fetcher knows of a slot's store.
type slotHead struct {
	known   bool    // false: look at once
	empty   bool    // nothing fetchable (empty, or all blocked)
	score   float64 // head score: due ms (time-based) or priority
	recheck int64   // Redis ms before which an all-blocked slot is not looked at
}

// Fetcher is the one goroutine that moves messages from store to prepare for
// a consumer. It keeps every slot's head score and takes messages in order
// across slots: from the best head, up to the next-best head, as many as
// there are free handlers. It sleeps until the earliest head comes due, a
// wake-up changes a head, or a handler finishes.
type Fetcher struct {
	c       Engine
	p       Params
	heads   []slotHead
	errWait time.Duration
	// yield estimates how many messages a named slot gives a merged fetch
	// (0: no estimate yet); plan names as many slots as fill the free
	// handlers by it.
	yield float64
	// turn moves on with every plan: among slots whose heads tie, the one
	// after it in slot order goes first, so equal scores (one priority, one
	// due millisecond) are served from every slot in turn, not slot 0 first.
	turn int
	// dheads (priority topics) is each slot's earliest delayed due time in
	// ms: -1 none, -3 unknown (look). A slot whose delayed head is due or
	// unknown is fetched with its delayed set looked at, which moves the
	// due entries into store; the fetcher sleeps until the earliest.
	dheads []float64
	// ahead (ms, 0 none) is how long before their instant messages are
	// taken (engine.lookaheadMs): those not due yet are held by the hub
	// and handed over at their instant (hold/holder.go). It is decided again
	// before each fetch, with the limits then in force: a topic that gains
	// a limit (Inspector.SetLimits at run time) stops taking messages
	// early, since a held message would be charged to the rate at its
	// fetch, not at its instant; one that loses it takes them again.
	ahead int64
	// Flow control (flow.go): the topic's rate allows the next start from
	// Redis ms flowUntil; flowBlocked: the topic is at its concurrency
	// limit, and the next wake-up or end of a delivery may change that.
	flowUntil   int64
	flowBlocked bool
	// flowRecheck (Redis ms, 0 none), while flowBlocked on a cluster: when
	// the first lease of the topic's places runs out.
	flowRecheck int64
	// lastBacklogFetch: when the last fetch that adapted the backlog's
	// prefetch began (adaptBacklog).
	lastBacklogFetch time.Time
	// calls is the context of the fetches' Redis calls (run: fetchGrace).
	calls context.Context
}

// New returns the fetcher of the engine c.
func New(c Engine, p Params) *Fetcher {
	f := &Fetcher{c: c, p: p, heads: make([]slotHead, p.Topic.SlotAmount())}
	if !p.Topic.Type().TimeBased() {
		f.dheads = make([]float64, p.Topic.SlotAmount())
		for i := range f.dheads {
			f.dheads[i] = -3
		}
	}
	return f
}

// delayedDue reports whether slot's delayed set should be looked at now.
func (f *Fetcher) delayedDue(slot int, nowMs int64) bool {
	if f.dheads == nil {
		return false
	}
	d := f.dheads[slot]
	return d == -3 || (d >= 0 && d <= float64(nowMs))
}

// applyDelayed folds 'd' wake-ups in and marks the slots whose delayed
// entries are due as unknown, so the next fetch looks at them.
func (f *Fetcher) applyDelayed(nowMs int64) {
	if f.dheads == nil {
		return
	}
	for slot, due := range f.c.TakeDelayed() {
		if slot >= 0 && slot < len(f.dheads) && f.dheads[slot] != -3 && (f.dheads[slot] < 0 || due < f.dheads[slot]) {
			f.dheads[slot] = due
		}
	}
	for i := range f.dheads {
		if f.heads[i].known && f.delayedDue(i, nowMs) {
			f.heads[i] = slotHead{}
		}
	}
}

func (f *Fetcher) timeBased() bool { return f.p.Topic.Type().TimeBased() }

// Run is the fetcher's loop, until ctx ends.
func (f *Fetcher) Run(ctx context.Context) {
	c := f.c
	timer := time.NewTimer(maxIdle)
	defer timer.Stop()
	// The fetches' Redis calls outlive the loop's context by fetchGrace,
	// one context for the fetcher's life rather than one per fetch.
	var stopCalls func()
	f.calls, stopCalls = withGrace(ctx, fetchGrace)
	defer stopCalls()
	f.lookFirst(ctx)
	for ctx.Err() == nil {
		// The waker re-reads the pause state on a resubscription itself
		// (recheckPaused), before it signals.
		f.applyWakes()
		wait := maxIdle
		// Set before the capacity is read, so a delivery that ends after
		// the read wakes this loop.
		c.WantRelease(true)
		free := c.FreeCapacity()
		ahead := f.ahead
		// A paused topic (Inspector.Pause) fetches nothing; the resume
		// arrives as a wake-up. Nor does one held back by a topic limit:
		// its rate's timer or a wake-up (flowWait) ends that.
		f.flowHousekeeping(ctx)
		if free > 0 && !c.Paused() && !f.flowWait(&wait) {
			// The limits a wake-up said changed are read before the
			// lookahead is decided on (fetch would read them only after
			// the plan; the read is once per change).
			f.p.Flow.EnsureLimits(ctx)
			f.ahead = c.LookaheadMs()
			ahead = f.ahead
			nowMs := f.p.Clock.Now().UnixMilli()
			f.applyDelayed(nowMs)
			if unknown := f.unknownSlots(); len(unknown) > 0 {
				f.fetch(ctx, unknownReqs(unknown), 0)
				continue
			}
			// What is due goes first, with all the free capacity, as
			// without a lookahead. Then messages due within it are taken,
			// to be held; held ones leave a handler free (heldRoom) for a
			// message due before them that arrives later, and once that
			// budget is spent only what is due is fetched.
			if ahead > 0 {
				if f.anyDue(nowMs) {
					ahead = 0
				} else if room := c.HeldRoom(); room <= 0 {
					ahead = 0
				} else {
					free = min(free, room)
				}
			}
			if reqs := f.plan(ctx, nowMs, free, ahead); len(reqs) > 0 {
				adapt := f.p.AdaptsBacklog && ahead == 0
				var idle int
				if adapt {
					idle = c.IdleHandlers()
				}
				var began time.Time
				if adapt {
					began = time.Now()
				}
				moved := f.fetch(ctx, reqs, free)
				if f.p.Merged {
					f.observeYield(moved, free, len(reqs))
				}
				if adapt {
					// A backlog: messages that were due before the fetch
					// began are still there (what came due during its
					// round trip is a stream, not a backlog).
					c.AdaptBacklog(moved, free, idle, f.anyDue(nowMs), began.Sub(f.lastBacklogFetch))
					f.lastBacklogFetch = began
				}
				continue
			}
			if at := f.earliest(); at != never {
				// Sleep by the best estimate of Redis's clock there is,
				// read once more when it is loose and the due time near.
				at -= ahead
				c.SyncClock()
				if d := f.p.Clock.UntilMs(at); d > 0 && d < fetchmux.ProbeHorizon && f.p.Calls.ProbeClock(ctx) {
					c.SyncClock()
				}
				wait = min(wait, max(f.p.Clock.UntilMs(at), 0))
			}
		}
		if f.p.AllSlots && free > 0 && ahead == f.ahead && !f.p.Flow.Active() {
			// Nothing is due and capacity is free: more capacity changes
			// nothing until a due time or a wake-up (no per-slot limit).
			// (With the held budget spent, a message handed over or
			// dropped lets the lookahead go on: that wakes this loop.)
			c.WantRelease(false)
		}
		wait = f.permitWait(wait)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-f.p.Signal:
			f.flowBlocked = false
		case <-f.p.Released:
			f.flowBlocked = false
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

// applyWakes folds wake-ups into the heads; it reports a resubscription
// (every head was reset).
func (f *Fetcher) applyWakes() bool {
	all, pending := f.c.TakeWakes()
	if all {
		for i := range f.heads {
			f.heads[i] = slotHead{}
		}
		for i := range f.dheads {
			f.dheads[i] = -3
		}
		return true
	}
	for slot, score := range pending {
		if slot < 0 || slot >= len(f.heads) {
			continue
		}
		h := &f.heads[slot]
		switch {
		case score < 0 || !h.known:
			*h = slotHead{}
		case h.empty:
			*h = slotHead{known: true, score: score}
		case redisops.BetterScore(f.timeBased(), score, h.score):
			h.score = score
		}
		h.recheck = 0
	}
	return false
}

func (f *Fetcher) unknownSlots() []int {
	var out []int
	for i, h := range f.heads {
		if !h.known && f.c.SlotFree(i) > 0 {
			out = append(out, i)
		}
	}
	return out
}

func unknownReqs(slots []int) []redisops.FetchReq {
	reqs := make([]redisops.FetchReq, len(slots))
	for i, s := range slots {
		reqs[i] = redisops.FetchReq{Slot: s}
	}
	return reqs
}

// anyDue reports whether some slot can be fetched at nowMs.
func (f *Fetcher) anyDue(nowMs int64) bool {
	for i := range f.heads {
		if f.readyAt(i) <= nowMs && f.c.SlotFree(i) > 0 {
			return true
		}
	}
	return false
}

// readyAt returns the Redis ms from which slot i can be fetched.
func (f *Fetcher) readyAt(i int) int64 {
	h := f.heads[i]
	switch {
	case !h.known:
		return 0
	case h.empty:
		if h.recheck > 0 {
			return h.recheck
		}
		return never
	case f.timeBased():
		return max(int64(math.Ceil(h.score)), h.recheck)
	default:
		return h.recheck
	}
}

// dueSlots lists the slots that can be fetched now, best head first.
func (f *Fetcher) dueSlots(nowMs int64) []int {
	var due []int
	for i := range f.heads {
		if f.readyAt(i) <= nowMs && f.c.SlotFree(i) > 0 {
			due = append(due, i)
		}
	}
	sort.Slice(due, func(i, j int) bool { return f.betterHead(due[i], due[j]) })
	return due
}

func (f *Fetcher) betterHead(a, b int) bool {
	ha, hb := f.heads[a], f.heads[b]
	if ha.empty != hb.empty {
		return hb.empty
	}
	if ha.score != hb.score {
		return redisops.BetterScore(f.timeBased(), ha.score, hb.score)
	}
	return f.tieFirst(a, b)
}

// tieFirst orders slots a and b whose scores tie: the first one at or
// after f.turn in slot order goes first.
func (f *Fetcher) tieFirst(a, b int) bool {
	n := len(f.heads)
	return (a-f.turn+n)%n < (b-f.turn+n)%n
}

// planOne fetches from the slot with the best due head, bounded by the
// next-best head, so messages leave the topic in order across slots.
func (f *Fetcher) planOne(due []int, free int) []redisops.FetchReq {
	best := due[0]
	req := redisops.FetchReq{Slot: best, N: min(free, f.c.SlotFree(best))}
	for _, s := range due[1:] {
		if !f.heads[s].empty {
			req.Bound = formatScore(f.heads[s].score)
			break
		}
	}
	return []redisops.FetchReq{req}
}

func formatScore(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func (f *Fetcher) earliest() int64 {
	e := int64(never)
	for i := range f.heads {
		if f.c.SlotFree(i) > 0 {
			e = min(e, f.readyAt(i))
			if f.dheads != nil && f.dheads[i] >= 0 {
				e = min(e, int64(math.Ceil(f.dheads[i])))
			}
		}
	}
	return e
}

// observeYield folds one merged fetch into f.yield: it moved moved of the
// wanted messages from named slots. A fetch that got fewer than it wanted
// measured how much the slots held (due, or within the bound); one that got
// all it wanted says only that they held at least that much, so it counts
// double and the next fetch names fewer slots.
func (f *Fetcher) observeYield(moved, wanted, named int) {
	y := float64(moved) / float64(named)
	if moved >= wanted {
		y *= 2
	}
	if f.yield == 0 {
		f.yield = max(y, 0.1)
		return
	}
	f.yield = max(0.7*f.yield+0.3*y, 0.1)
}

// fetch runs reqs and returns how many messages it moved.
func (f *Fetcher) fetch(ctx context.Context, reqs []redisops.FetchReq, total int) (moved int) {
	c := f.c
	if f.dheads != nil {
		nowMs := f.p.Clock.Now().UnixMilli()
		for i := range reqs {
			reqs[i].CheckDelayed = f.delayedDue(reqs[i].Slot, nowMs)
		}
	}
	results := f.p.Ops.Fetch(f.calls, reqs, total)
	failed, missed := false, false
	for _, r := range results {
		if r.Skipped {
			continue
		}
		if scripts.IsFenced(r.Err) {
			c.Fenced(r.Slot, r.Epoch, "fetch")
			continue
		}
		if r.Err != nil && len(r.Msgs) == 0 {
			failed = true
			continue
		}
		f.dispatchOrHold(r.Msgs)
		moved += len(r.Msgs)
		f.noteFlow(r)
		if len(r.Msgs) == 0 && f.heads[r.Slot].known && !f.heads[r.Slot].empty {
			missed = true
		}
		f.heads[r.Slot] = f.headOf(r)
		if f.dheads != nil && r.DelayedHead != -3 {
			f.dheads[r.Slot] = r.DelayedHead
		}
	}
	if moved > 0 {
		c.Leased()
	}
	if missed || failed {
		// A head this fetcher believed due was gone: another consumer
		// leased it, and no wake-up tells of that; or the fetch failed,
		// maybe after Redis moved messages whose reply was lost. The
		// sweeper looks at the topic, in case those leases run out.
		c.Heard()
	}
	if !failed {
		f.errWait = 0
		return moved
	}
	if ctx.Err() != nil {
		return moved
	}
	// Redis is unreachable or failing: back off; the slots stay as they were.
	f.errWait = clock.NextBackoff(f.errWait)
	for _, r := range results {
		if r.Err != nil {
			f.p.Log.WarnContext(ctx, "rmq: fetch failed", "slot", r.Slot, "err", r.Err, "retry_in", f.errWait)
			break
		}
	}
	t := time.NewTimer(f.errWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-f.p.Signal:
		// A wake-up (a resubscription after a failover, say) means Redis
		// answers again: try now rather than sleep out the backoff.
	}
	return moved
}

// fetchGrace is how long a fetch under way may go on once its fetcher's
// context ended (Close). go-redis gives up on a reply it is reading when
// the call's context ends, and a fetch whose reply is lost leaves the
// messages Redis moved to prepare there until their lease runs out; seen
// on a cluster, whose per-slot calls go out pipelined, when Close came
// during a fetch. With the reply, the fetcher dispatches them and Close
// gives them back to store (giveBackWaiting). Redis's read timeouts still
// bound a call to a server that does not answer.
const fetchGrace = 250 * time.Millisecond

// withGrace returns a context that ends grace after ctx does (or when
// stop is called), with ctx's values.
func withGrace(ctx context.Context, grace time.Duration) (_ context.Context, stop func()) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer atomic.Pointer[time.Timer]
	unhook := context.AfterFunc(ctx, func() { timer.Store(time.AfterFunc(grace, cancel)) })
	return gctx, func() {
		unhook()
		if t := timer.Load(); t != nil {
			t.Stop()
		}
		cancel()
	}
}

// dispatchOrHold starts the messages that were due when the fetch ran and
// hands the others, taken ahead of their instant (with a held token:
// fetch.lua), to the hub's holder.
func (f *Fetcher) dispatchOrHold(msgs []*consumer.Message) {
	if f.ahead == 0 {
		f.c.Dispatch(msgs)
		return
	}
	var held []*consumer.Message
	for _, m := range msgs {
		if scripts.IsHeld(m.Token) {
			held = append(held, m)
		} else {
			f.c.DispatchOne(m)
		}
	}
	if len(held) > 0 {
		f.c.HoldAll(held)
	}
}

// nextBackoff is the wait after a failed call to Redis that followed a
// wait of d: 50 ms, doubling up to 5 s.
func (f *Fetcher) headOf(r redisops.FetchResult) slotHead {
	switch {
	case r.Head == -1:
		return slotHead{known: true, empty: true}
	case r.Head == -2 && r.GroupWait > 0:
		// Held back by a group's rate: look again when it allows a start.
		return slotHead{known: true, empty: true, recheck: r.GroupWait}
	case r.Head == -2:
		return slotHead{known: true, empty: true, recheck: r.NowUs/1000 + blockedRecheck.Milliseconds()}
	}
	return slotHead{known: true, score: r.Head}
}
