// Package lease is the client's one sweeper and one lease keeper (Hub):
// when each engine's prepare sets are checked for leases that ran out, and
// when its deliveries in flight are extended.
package lease

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/timerq"
)

// Hub: one sweeper and one lease keeper for every topic of the client
// instead of a goroutine and a ticker of each per topic.
//
// Sweeping follows what the hub knows rather than a clock:
//   - After a check of an engine (its prepare heads read: the earliest
//     lease of each active slot, probe.go), expired leases are rolled
//     back (sweep.go). If a prepare set is left non-empty the engine is
//     checked again at min(earliest lease expiry, now + sweepInterval): the
//     sweepInterval bound is what it was (another consumer may lease with a
//     shorter lease than the earliest one seen); if every prepare set is
//     empty the engine is idle: nothing runs for it until something happens.
//   - Something happens: leased (this client took leases: check when they
//     run out), heard (a wake-up: any consumer may lease from the topic now:
//     look at now + sweepInterval), resubscribed (wake-ups may have been
//     missed: every idle engine probed now), an engine starts (probed at
//     once: a consumer that starts recovers what a dead one left).
//   - A probe asks only whether an engine's prepare sets exist (an empty
//     ZSET does not): on a single node one EXISTS names the prepare keys of
//     many engines, so 1,000 idle topics cost one command per probe round;
//     only a positive answer is narrowed down (one EXISTS per engine) and
//     read.
//   - Safety net: leases taken by another process from a topic whose
//     wake-up this client never heard (a message due later than its
//     wake-up, fetched by a consumer that then died) are found by a slow
//     probe of every idle engine: one command a round on a single node,
//     every min sweepInterval; on a cluster every prepare key sits in a hash
//     slot of its own, so the idle engines are read round-robin at a budget
//     of keys per second (clusterProbeRate): a slower net, but no command
//     storm.
//
// Choices and why:
//   - The head read (ZRANGE prepare 0 0 WITHSCORES per slot) replaces the
//     old sweeper's expiredCandidates: the earliest lease tells both whether
//     a slot has an expired lease and when the next one runs out, in the
//     same one command a slot.
//   - A prepare deadline is a whole second (sweep.lua: expired once Redis's
//     second is past it), so a check is timed to the next second after it,
//     converted to local time with Redis's TIME read in the same pipeline.
//     That offset is the sweeper's own: the engines' clocks steer their
//     fetchers, and a long pipeline's reply would make them fire late.
//   - The check at a fetch's lease expiry (leased) probes first: mostly the
//     deliveries were acked long before, and one EXISTS for all the topics
//     leased in the same second answers that. It is never run early; plain
//     probes may run up to probeBatch early so that a wave of wake-ups heard
//     over a few milliseconds shares one command.
//   - Still uncovered at the deadline: a lease an unknown process takes
//     after this client's probe saw the topic empty, with no wake-up between
//     (a message due later than its wake-up). The net finds it within its
//     period, about as late as the old ticker did.
//
// Lease keeping: one queue of engines with deliveries in flight, each
// extended at its own interval (max(prepareTimeout/3, 300ms)), each
// extension in a short goroutine of its own so a slow node delays no other
// engine. An engine enters the queue when it leases (leased) and leaves it
// when a round finds nothing in flight.
//
// The hooks (leased, heard, resubscribed) run on hot paths: a map lookup
// and a heap update under l.mu, a non-blocking kick, never a Redis call.
// An engine is added at Start and removed in two steps by Close:
// StopSweeping (with the loops) and stopKeeping (after the handlers
// drained); each waits for a call of the hub into the engine that runs, and
// the hub calls it no more.
type Hub struct {
	mu      sync.Mutex
	ctx     context.Context // the hub's actors'; nil until the hub's first use
	engines map[Engine]*state
	order   []*state             // registration order: the cluster probe's round-robin
	sweeps  timerq.Queue[*state] // engines with a check due, by time
	keeps   timerq.Queue[*state] // engines with leases to extend, by time
	probeAt time.Time            // next safety-net round; zero: none yet
	cursor  int                  // cluster probe: next index into order
	lastRes time.Time            // last resubscribed round (cluster)

	sweepKick chan struct{}
	keepKick  chan struct{}
}

// state is the hub's record of one engine. Guarded by Hub.mu.
type state struct {
	c Engine
	p Params
	// sweeping
	sweep       timerq.Timed[*state]
	read        bool // the check reads heads at once (checkRead)
	exact       bool // the check is not run early (checkExact, checkRead)
	sweepClosed bool
	sweepUse    sync.WaitGroup // a sweep of the hub into the engine runs
	// keeping
	keep        timerq.Timed[*state]
	keeping     bool // in keeps or an extension runs
	leasedAgain bool // leased while an extension ran
	keepClosed  bool
	keepUse     sync.WaitGroup
	interval    time.Duration
	// prepare keys, when fixed (probe.go prepareKeys); only the
	// sweeper goroutine touches them
	fixed bool
	slots []int
	keys  []string
	args  []any
}

const (
	// sweepMargin: a check at a lease's expiry runs this much after it, so
	// that Redis's clock has passed it too.
	sweepMargin = 5 * time.Millisecond
	// probeBatch: probes due within this much are made in one round (a wave
	// of wake-ups heard over a few milliseconds costs one command, not one
	// per topic).
	probeBatch = 25 * time.Millisecond
	// resubscribeBatch: resubscriptions within this much share one probe
	// round.
	resubscribeBatch = 100 * time.Millisecond
	// minNetInterval bounds how often the safety net runs.
	minNetInterval = 200 * time.Millisecond
	// netKeysPerSec: on a single node the net round's period grows with the
	// number of keys it names, so 10,000 topics do not send 160,000 keys a
	// second.
	netKeysPerSec = 50_000
	// clusterProbeRate is how many prepare keys a second the safety net
	// reads on a cluster (one command each).
	clusterProbeRate = 50
)

// New returns a lease hub with no engine.
func New() *Hub {
	return &Hub{
		engines:   map[Engine]*state{},
		sweepKick: make(chan struct{}, 1),
		keepKick:  make(chan struct{}, 1),
	}
}

// SetContext gives the hub's actors' context, which probes started by an
// engine's Start check (the sweeper and the lease keeper run with it).
func (l *Hub) SetContext(ctx context.Context) {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
}

// Add registers a started engine: it is probed at once (what a dead
// consumer left in prepare is recovered) and followed from then on.
func (l *Hub) Add(c Engine, p Params) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.engines[c]; ok {
		return
	}
	st := &state{c: c, p: p, interval: max(p.PrepareTimeout/3, 300*time.Millisecond)}
	st.sweep.Init(st)
	st.keep.Init(st)
	l.engines[c] = st
	l.order = append(l.order, st)
	l.scheduleSweepLocked(st, time.Now(), checkProbe)
}

// StopSweeping ends the hub's sweeps of c and returns once none runs.
func (l *Hub) StopSweeping(c Engine) {
	l.mu.Lock()
	st := l.engines[c]
	if st == nil {
		l.mu.Unlock()
		return
	}
	st.sweepClosed = true
	l.sweeps.Remove(&st.sweep)
	l.mu.Unlock()
	st.sweepUse.Wait()
}

// StopKeeping ends the hub's lease extensions of c, returns once none runs,
// and forgets c.
func (l *Hub) StopKeeping(c Engine) {
	l.StopSweeping(c)
	l.mu.Lock()
	st := l.engines[c]
	if st == nil {
		l.mu.Unlock()
		return
	}
	st.keepClosed = true
	l.keeps.Remove(&st.keep)
	delete(l.engines, c)
	for i, o := range l.order {
		if o == st {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	st.keepUse.Wait()
}

// Leased tells that c just leased messages whose leases run out at until
// at the earliest (a fetch, or a pull with the caller's lease).
func (l *Hub) Leased(c Engine, until time.Time) {
	l.mu.Lock()
	st := l.engines[c]
	if st == nil {
		l.mu.Unlock()
		return
	}
	// A prepare deadline is a whole second; the lease runs out when Redis's
	// clock passes it (sweep.lua), at most a second after until. Mostly the
	// deliveries are acked by then: a probe first, not a read.
	at, kind := until.Truncate(time.Second).Add(time.Second+sweepMargin), checkExact
	// A long lease (a Pull may name hours) must not hold the topic's next
	// check back: another process's shorter lease there runs out sooner,
	// and a sweep interval is what an expired lease may wait.
	if soon := time.Now().Add(st.p.SweepInterval); soon.Before(at) {
		at, kind = soon, checkProbe
	}
	l.scheduleSweepLocked(st, at, kind)
	kick := false
	if !st.p.Pull && !st.keepClosed {
		if st.keeping {
			st.leasedAgain = true
		} else {
			st.keeping = true
			kick = l.keeps.Set(&st.keep, time.Now().Add(st.interval))
		}
	}
	l.mu.Unlock()
	if kick {
		poke(l.keepKick)
	}
}

// Heard tells that a wake-up of one of c's slots arrived: messages may be
// Leased there from now (or from its due time) by any consumer.
func (l *Hub) Heard(c Engine) {
	l.mu.Lock()
	// Even with a check queued: scheduleSweepLocked only ever moves it
	// earlier, and a queued check may be a long lease's, later than this.
	if st := l.engines[c]; st != nil {
		l.scheduleSweepLocked(st, time.Now().Add(st.p.SweepInterval), checkProbe)
	}
	l.mu.Unlock()
}

// Resubscribed tells that wake-ups may have been missed (a subscription was
// made again): every topic is looked at once.
func (l *Hub) Resubscribed() {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) == 0 {
		return
	}
	if _, single := l.order[0].p.RDB.(*redis.Client); single {
		// The net's next round probes every idle engine in one command;
		// a burst of resubscriptions (every topic's, when each has its
		// own) shares the round that starts after it.
		if at := now.Add(resubscribeBatch); l.probeAt.IsZero() || l.probeAt.After(at) {
			l.probeAt = at
			poke(l.sweepKick)
		}
		return
	}
	// Cluster: every idle engine read once, spread over up to 10s (one
	// call for many topics' resubscriptions in a burst).
	if now.Sub(l.lastRes) < 100*time.Millisecond {
		return
	}
	l.lastRes = now
	window := min(time.Duration(len(l.order))*10*time.Millisecond, 10*time.Second)
	for i, st := range l.order {
		if !st.sweep.Queued() && !st.sweepClosed {
			l.scheduleSweepLocked(st, now.Add(window*time.Duration(i)/time.Duration(len(l.order))), checkRead)
		}
	}
}

// How a check runs (scheduleSweepLocked).
const (
	checkProbe = iota // probe first, may run a little early (batched)
	checkExact        // probe first, timed to a lease's expiry: not early
	checkRead         // read the heads at once (leases are known to exist), not early
)

// scheduleSweepLocked makes st's next check no later than at. A check
// that stays where it was keeps its kind, and becomes a read if asked.
func (l *Hub) scheduleSweepLocked(st *state, at time.Time, kind int) {
	if st.sweepClosed {
		return
	}
	if st.sweep.Queued() && !at.Before(st.sweep.At) {
		st.read = st.read || kind == checkRead
		return
	}
	st.read = st.read || kind == checkRead
	st.exact = kind != checkProbe
	if l.sweeps.Set(&st.sweep, at) {
		poke(l.sweepKick)
	}
}

// poke sends a non-blocking signal.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// RunSweeps is the one sweeper goroutine: it sleeps until the earliest check
// due (or the safety net's round) and runs the checks due.
func (l *Hub) RunSweeps(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		l.mu.Lock()
		next := l.nextSweepLocked(now)
		l.mu.Unlock()
		if wait := next.Sub(now); wait > 0 {
			resetTimer(t, wait)
			select {
			case <-ctx.Done():
				return
			case <-l.sweepKick:
				continue
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		l.sweepDue(ctx, time.Now())
	}
}

// nextSweepLocked is when the sweeper has something to do.
func (l *Hub) nextSweepLocked(now time.Time) time.Time {
	next := now.Add(time.Hour)
	if top := l.sweeps.Peek(); top != nil && top.At.Before(next) {
		next = top.At
	}
	if len(l.engines) > 0 {
		if l.probeAt.IsZero() {
			l.probeAt = now.Add(l.netIntervalLocked())
		}
		if l.probeAt.Before(next) {
			next = l.probeAt
		}
	}
	return next
}

// netIntervalLocked is the period of the safety net's rounds: the smallest
// sweepInterval of the engines (a lease nobody here heard of is rolled back
// about as late as a swept topic's), at least minNetInterval, and longer
// for very many keys on a single node.
func (l *Hub) netIntervalLocked() time.Duration {
	iv := time.Duration(0)
	keys := 0
	for _, st := range l.order {
		if iv == 0 || st.p.SweepInterval < iv {
			iv = st.p.SweepInterval
		}
		keys += st.p.SlotAmount
	}
	return max(iv, minNetInterval, time.Duration(keys)*time.Second/netKeysPerSec)
}

// sweepDue takes the checks due at now (probes a little early, to batch
// them) and the safety net's round if due, and runs them.
func (l *Hub) sweepDue(ctx context.Context, now time.Time) {
	var reads, probes []*state
	var later []*timerq.Timed[*state]
	l.mu.Lock()
	for top := l.sweeps.Peek(); top != nil && !top.At.After(now.Add(probeBatch)); top = l.sweeps.Peek() {
		l.sweeps.Pop()
		st := top.V
		if (st.read || st.exact) && top.At.After(now) {
			// Timed to a lease's expiry: not early.
			later = append(later, top)
			continue
		}
		if st.read {
			reads = append(reads, st)
		} else {
			probes = append(probes, st)
		}
		st.read, st.exact = false, false
	}
	for _, t := range later {
		l.sweeps.Set(t, t.At)
	}
	var net []*state
	if !l.probeAt.IsZero() && !now.Before(l.probeAt) {
		taken := make(map[*state]bool, len(reads)+len(probes))
		for _, st := range reads {
			taken[st] = true
		}
		for _, st := range probes {
			taken[st] = true
		}
		net = l.netRoundLocked(taken)
		l.probeAt = now.Add(l.netIntervalLocked())
	}
	l.mu.Unlock()
	if len(reads)+len(probes)+len(net) > 0 {
		l.check(ctx, reads, probes, net)
	}
}

// netRoundLocked picks the idle engines the safety net looks at now: all
// of them on a single node (one probe command), a budget of keys on a
// cluster (read round-robin). taken are checked in this round already.
func (l *Hub) netRoundLocked(taken map[*state]bool) []*state {
	if len(l.order) == 0 {
		return nil
	}
	_, single := l.order[0].p.RDB.(*redis.Client)
	var out []*state
	if single {
		for _, st := range l.order {
			if !st.sweep.Queued() && !st.sweepClosed && !taken[st] {
				out = append(out, st)
			}
		}
		return out
	}
	budget := max(int(l.netIntervalLocked()*clusterProbeRate/time.Second), 1)
	for n := 0; n < len(l.order) && budget > 0; n++ {
		l.cursor %= len(l.order)
		st := l.order[l.cursor]
		l.cursor++
		if !st.sweep.Queued() && !st.sweepClosed && !taken[st] {
			out = append(out, st)
			budget -= st.p.SlotAmount
		}
	}
	return out
}

// finishCheck schedules st after a check: its next check at next, or none
// (zero next: nothing in prepare) unless a hook scheduled one meanwhile.
func (l *Hub) finishCheck(st *state, next time.Time) {
	if next.IsZero() {
		return
	}
	l.mu.Lock()
	l.scheduleSweepLocked(st, next, checkRead)
	l.mu.Unlock()
}

// useForSweep marks st's engine in use by a sweep; false once it stopped.
func (l *Hub) useForSweep(st *state) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.sweepClosed {
		return false
	}
	st.sweepUse.Add(1)
	return true
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
