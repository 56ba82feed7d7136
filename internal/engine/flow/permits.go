package flow

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
)

// PermitValidity is how long after their grant reached the client a
// cluster's rate starts may still be sent to a fetch (permit.lua): one
// interval of the rate, 5 to 50 ms, by the client's own monotonic clock.
// A client that stalls longer between the two calls (a pause, a starved
// CPU) fetches nothing and gives them back, so its starts cannot bunch up.
// The nodes' clocks are never compared: a fetch takes what was granted
// however long the network takes to carry it.
func PermitValidity(l options.Limits) time.Duration {
	iv := l.RatePer / time.Duration(max(l.Rate, 1))
	return min(max(iv, 5*time.Millisecond), 50*time.Millisecond)
}

// healAfter is how long a client waits at a cluster's concurrency limit
// before it checks the places against the slots' prepare sets (heal).
const healAfter = 5 * time.Second

// Permits is an engine's share of its topic's topic-wide limits on a Redis
// Cluster (docs/flow-control.md). The topic's slots lie on several nodes,
// so no slot's fetch can see the whole topic: the rate and the places
// live on the node of the topic's own hash tag (keyspace.FlowKeys), and the
// engine takes permits there (permit.lua) before it fetches. A place is
// first a reservation of the call that granted it, then the delivery the
// fetch leased with it (bind), held under that delivery's lease: a push
// delivery's is renewed by the fetcher while it runs (keepAlive), a
// pulled one's is the pull's lease (Extend renews it). Ending a delivery
// gives its place back by name, whichever process ends it. It costs a
// round trip to that node before each fetch of a limited topic, one after
// a fetch that used fewer than it took (or after every pull: its
// deliveries are bound before they are handed out), one per fetcher
// wake-up that gives places back, and one per end of a pulled delivery.
type Permits struct {
	env    PermitEnv
	client string
	seq    atomic.Uint64

	mu      sync.Mutex
	release []string            // reservations not used
	binds   []scripts.PlaceBind // deliveries to bind to their reservations
	ends    []scripts.PlaceEnd  // push deliveries that ended
	refund  int                 // rate starts not used
	// pushed and pulled are the deliveries of this engine that hold a
	// place (bound, or to be with the next call): member -> token; pushed
	// ones are renewed with the fetcher's keepalive, pulled ones are
	// forgotten once their lease ran out (their place lapsed with it).
	pushed       map[string]int64
	pulled       map[string]pulledPlace
	renewed      time.Time // the last call that renewed the pushed ones
	blockedSince time.Time // the first of the grants that found no place
}

// PermitEnv is what an engine's Permits need of it; it does not change.
type PermitEnv struct {
	RDB     redis.UniversalClient
	Log     *slog.Logger
	WakeCmd string // permit.lua's wake command of the engine's client
	// Wake is slot 0's wake channel, on which every consumer of the topic
	// listens for places that came free.
	Wake           string
	PrepareTimeout time.Duration
	FlowKeys       keyspace.FlowKeys
	// Prepares: every slot's prepare set (heal counts them).
	Prepares []string
	// Limits returns the limits in force.
	Limits func() options.Limits
}

// NewPermits returns an engine's share of its topic's topic-wide limits.
func NewPermits(env PermitEnv) *Permits {
	return &Permits{env: env, client: "e" + scripts.Nonce(), pushed: map[string]int64{}, pulled: map[string]pulledPlace{}}
}

// Limited reports whether the topic has topic-wide limits.
func (p *Permits) Limited() bool {
	l := p.env.Limits()
	return l.Rate > 0 || l.Concurrency > 0
}

// pulledPlace is a pulled delivery's place: its token, and when its lease
// runs out (by this client's clock; renewed with Extend).
type pulledPlace struct {
	token int64
	until time.Time
}

// lease is how long a reservation, and a push delivery's place, outlive
// the call that last renewed them.
func (p *Permits) lease() time.Duration { return max(p.env.PrepareTimeout, time.Second) }

// Grant is what Take got: the reply, the call's id (its reservations are
// scripts.Reservation(id, 1..Granted) with a concurrency) and when the
// reply came (the client's monotonic clock: PermitValidity).
type Grant struct {
	scripts.PermitReply
	id   string
	At   time.Time
	conc bool
}

// RunPermit runs one permit.lua call; a reply that says places came free
// while someone waited wakes the topic's consumers (they all listen on
// slot 0's channel, wake).
func RunPermit(ctx context.Context, rdb redis.UniversalClient, wakeCmd, wake string, pc scripts.PermitCall) (scripts.PermitReply, error) {
	keys, args := pc.Args()
	vals, err := scripts.Permit.Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return scripts.PermitReply{}, err
	}
	r, err := scripts.ParsePermitReply(vals)
	if err != nil {
		return r, err
	}
	if r.Woke {
		if wakeCmd == "SPUBLISH" {
			rdb.SPublish(ctx, wake, "f")
		} else {
			rdb.Publish(ctx, wake, "f")
		}
	}
	return r, nil
}

// call runs permit.lua for this engine: take want, with what is queued
// (reservations not used, bindings, ends, refunds) and, when due or asked,
// the renewal of the pushed places. What it carried is queued again when
// it fails (every part of a call may be sent twice: permit.lua keys its
// effects by name).
func (p *Permits) call(ctx context.Context, want int, renew bool) (Grant, error) {
	l := p.env.Limits()
	id := p.nextID()
	pc := scripts.PermitCall{Keys: p.env.FlowKeys, ID: id, Want: want, ReserveMs: p.lease().Milliseconds(), Concurrency: l.Concurrency}
	pc.RateIv, pc.RateTol = options.GCRA(l.Rate, l.RatePer)
	p.mu.Lock()
	pc.Release, pc.Bind, pc.End, pc.Refund = p.release, p.binds, p.ends, p.refund
	p.release, p.binds, p.ends, p.refund = nil, nil, nil, 0
	now := time.Now()
	if renew || (len(p.pushed) > 0 && !now.Before(p.renewed.Add(p.lease()/3))) {
		renew = true
		ms := p.lease().Milliseconds()
		for m := range p.pushed {
			pc.Renew = append(pc.Renew, scripts.PlaceRenew{Member: m, LeaseMs: ms})
		}
	}
	p.mu.Unlock()
	r, err := RunPermit(ctx, p.env.RDB, p.env.WakeCmd, p.env.Wake, pc)
	at := time.Now()
	p.mu.Lock()
	if err != nil {
		p.release = append(pc.Release, p.release...)
		p.binds = append(pc.Bind, p.binds...)
		p.ends = append(pc.End, p.ends...)
		p.refund += pc.Refund
	} else if renew {
		p.renewed = now
	}
	p.mu.Unlock()
	if err != nil {
		return Grant{}, err
	}
	return Grant{PermitReply: r, id: id, At: at, conc: l.Concurrency > 0}, nil
}

// Take asks for want permits before a fetch, carrying what is queued. A
// failed call grants nothing and keeps what it carried. A client that has
// found no place free for healAfter checks the places (heal), and asks
// again when that gave some back.
func (p *Permits) Take(ctx context.Context, want int) (Grant, error) {
	g, err := p.call(ctx, want, false)
	if err != nil || want == 0 {
		return g, err
	}
	if p.noteBlocked(g.Wait == -1) {
		n, herr := p.heal(ctx)
		if herr != nil {
			p.env.Log.WarnContext(ctx, "rmq: check the topic's places", "err", herr)
		}
		if n > 0 {
			// The first grant found no place free, so it granted nothing.
			if g2, err := p.call(ctx, want, false); err == nil {
				return g2, nil
			}
		}
	}
	return g, nil
}

// Fetched settles a grant after its fetch moved msgs: each delivery takes
// one of the reservations (bound under leaseMs), the reservations and
// rate starts left over go back. A pull (pulled) settles at once, in a
// call of its own, before its deliveries are handed out, so that an end
// by another process never comes before its binding; a push fetch that
// used its whole grant leaves the bindings to the next call (its own ends
// come after them).
func (p *Permits) Fetched(ctx context.Context, g Grant, msgs []*consumer.Message, leaseMs int64, pulled bool) {
	var ops placeOps
	if g.conc {
		for i, m := range msgs {
			b := scripts.PlaceBind{Member: scripts.PlaceMember(m.Slot, m.ID), Token: m.Token, LeaseMs: leaseMs}
			if i < g.Granted {
				b.Reservation = scripts.Reservation(g.id, i+1)
			}
			ops.binds = append(ops.binds, b)
		}
		for i := len(msgs) + 1; i <= g.Granted; i++ {
			ops.release = append(ops.release, scripts.Reservation(g.id, i))
		}
	}
	if l := p.env.Limits(); l.Rate > 0 && g.Granted > len(msgs) {
		ops.refund = g.Granted - len(msgs)
	}
	p.mu.Lock()
	now := time.Now()
	if pulled {
		for m, pp := range p.pulled {
			if now.After(pp.until) {
				delete(p.pulled, m)
			}
		}
	}
	for _, b := range ops.binds {
		if pulled {
			p.pulled[b.Member] = pulledPlace{token: b.Token, until: now.Add(time.Duration(leaseMs) * time.Millisecond)}
		} else {
			p.pushed[b.Member] = b.Token
		}
	}
	if !pulled {
		p.binds = append(p.binds, ops.binds...)
		ops.binds = nil
	}
	p.mu.Unlock()
	if ops.empty() {
		return
	}
	if err := p.send(ctx, ops); err != nil {
		// Kept for the next call.
		p.env.Log.WarnContext(ctx, "rmq: settle permits", "err", err)
	}
}

// placeOps are changes to the places (and rate refunds) one call carries.
type placeOps struct {
	release []string
	binds   []scripts.PlaceBind
	ends    []scripts.PlaceEnd
	refund  int
}

func (o placeOps) empty() bool {
	return len(o.release) == 0 && len(o.binds) == 0 && len(o.ends) == 0 && o.refund == 0
}

// send runs a call that carries ops and nothing else, so its caller knows
// they were applied when it returns nil; a failed call queues them for the
// next call (each may be applied twice: permit.lua keys them by name).
func (p *Permits) send(ctx context.Context, ops placeOps) error {
	l := p.env.Limits()
	pc := scripts.PermitCall{Keys: p.env.FlowKeys, ID: p.nextID(), Concurrency: l.Concurrency,
		Release: ops.release, Bind: ops.binds, End: ops.ends, Refund: ops.refund}
	pc.RateIv, pc.RateTol = options.GCRA(l.Rate, l.RatePer)
	if _, err := RunPermit(ctx, p.env.RDB, p.env.WakeCmd, p.env.Wake, pc); err != nil {
		p.mu.Lock()
		p.release = append(p.release, ops.release...)
		p.binds = append(p.binds, ops.binds...)
		p.ends = append(p.ends, ops.ends...)
		p.refund += ops.refund
		p.mu.Unlock()
		return err
	}
	return nil
}

// nextID names a call of this engine.
func (p *Permits) nextID() string { return p.client + ":" + strconv.FormatUint(p.seq.Add(1), 36) }

// Ended notes that a push delivery ended: its place goes back with the
// next call (the fetcher is woken for it). A delivery that holds none (it
// was leased before the topic had a concurrency limit) gives nothing.
func (p *Permits) Ended(m *consumer.Message) {
	member := scripts.PlaceMember(m.Slot, m.ID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if tok, ok := p.pushed[member]; ok && tok == m.Token {
		delete(p.pushed, member)
		p.ends = append(p.ends, scripts.PlaceEnd{Member: member, Token: m.Token})
	}
}

// EndPulled gives back the place of a pulled delivery of this engine that
// Ended (acked or nacked, or found no longer its), at once: the caller
// may pull again through another process next.
func (p *Permits) EndPulled(ctx context.Context, m *consumer.Message) {
	member := scripts.PlaceMember(m.Slot, m.ID)
	p.mu.Lock()
	pp, ok := p.pulled[member]
	ok = ok && pp.token == m.Token
	if ok {
		delete(p.pulled, member)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	if err := p.send(ctx, placeOps{ends: []scripts.PlaceEnd{{Member: member, Token: m.Token}}}); err != nil {
		p.env.Log.WarnContext(ctx, "rmq: give back a place", "err", err)
	}
}

// EndByID gives back the place of whatever delivery of id in slot holds
// one: an ack or nack by id (rmqd's DELETE job, maybe of a job another
// process pulled). Without a concurrency limit and no place of its own
// there is nothing to give.
func (p *Permits) EndByID(ctx context.Context, slot int, id string) {
	member := scripts.PlaceMember(slot, id)
	p.mu.Lock()
	pp, mine := p.pulled[member]
	tok := pp.token
	if mine {
		delete(p.pulled, member)
	} else {
		tok = -1
	}
	p.mu.Unlock()
	if !mine && p.env.Limits().Concurrency == 0 {
		return
	}
	if err := p.send(ctx, placeOps{ends: []scripts.PlaceEnd{{Member: member, Token: tok}}}); err != nil {
		p.env.Log.WarnContext(ctx, "rmq: give back a place", "err", err)
	}
}

// Forget drops a pulled delivery that another engine of the topic gave
// back by id.
func (p *Permits) Forget(slot int, id string) {
	p.mu.Lock()
	delete(p.pulled, scripts.PlaceMember(slot, id))
	p.mu.Unlock()
}

// Extended renews the place of a pulled delivery whose lease was extended
// to dur from now.
func (p *Permits) Extended(ctx context.Context, m *consumer.Message, dur time.Duration) {
	member := scripts.PlaceMember(m.Slot, m.ID)
	p.mu.Lock()
	pp, ok := p.pulled[member]
	ok = ok && pp.token == m.Token
	if ok {
		pp.until = time.Now().Add(dur)
		p.pulled[member] = pp
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	l := p.env.Limits()
	pc := scripts.PermitCall{Keys: p.env.FlowKeys, ID: p.nextID(), Concurrency: l.Concurrency,
		Renew: []scripts.PlaceRenew{{Member: member, LeaseMs: dur.Milliseconds()}}}
	if _, err := RunPermit(ctx, p.env.RDB, p.env.WakeCmd, p.env.Wake, pc); err != nil {
		p.env.Log.WarnContext(ctx, "rmq: renew a place", "err", err)
	}
}

// Pending reports whether something waits to be given back, and when the
// places of the push deliveries (and reservations waiting for their
// binding) must be renewed (zero: none).
func (p *Permits) Pending() (give bool, renew time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pushed) > 0 || len(p.binds) > 0 {
		renew = p.renewed.Add(p.lease() / 3)
	}
	return len(p.ends) > 0 || len(p.release) > 0 || p.refund > 0, renew
}

// Flush gives back what ended and renews the places held.
func (p *Permits) Flush(ctx context.Context) {
	if _, err := p.call(ctx, 0, true); err != nil {
		p.env.Log.WarnContext(ctx, "rmq: give back permits", "err", err)
	}
}

// noteBlocked follows how long this client has found no place free, and
// reports whether it is time to check the places (past healAfter, then
// every healAfter).
func (p *Permits) noteBlocked(blocked bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !blocked {
		p.blockedSince = time.Time{}
		return false
	}
	now := time.Now()
	if p.blockedSince.IsZero() {
		p.blockedSince = now
	}
	if now.Sub(p.blockedSince) < healAfter {
		return false
	}
	p.blockedSince = now
	return true
}

// heal drops the places of deliveries that are no longer in their slot's
// prepare set under the token they were bound with: a give-back that was
// lost (a failed call never sent again, an end by a process that knew of
// no limit, a write the flow node lost in a failover). A delivery that is
// still leased keeps its place; one that ended gave it back already or
// gives it now (the end is by token, so once).
//
// It returns how many places it gave back.
func heal(ctx context.Context, rdb redis.UniversalClient, fk keyspace.FlowKeys, prepares []string, run func(scripts.PermitCall) error) (int, error) {
	members, err := rdb.ZRange(ctx, fk.Places, 0, -1).Result()
	if err != nil {
		return 0, err
	}
	var ds []string
	for _, m := range members {
		if len(m) > 2 && m[:2] == "r:" {
			continue // a reservation: it lapses by itself
		}
		ds = append(ds, m)
	}
	if len(ds) == 0 {
		return 0, nil
	}
	toks, err := rdb.HMGet(ctx, fk.Tokens, ds...).Result()
	if err != nil {
		return 0, err
	}
	pipe := rdb.Pipeline()
	type check struct {
		member string
		token  int64
		score  *redis.FloatCmd
	}
	var cs []check
	for i, m := range ds {
		s, ok := toks[i].(string)
		if !ok {
			continue
		}
		tok, err1 := strconv.ParseInt(s, 10, 64)
		slot, id, ok := splitPlace(m)
		if err1 != nil || !ok || slot >= len(prepares) {
			continue
		}
		cs = append(cs, check{member: m, token: tok, score: pipe.ZScore(ctx, prepares[slot], id)})
	}
	if len(cs) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var ends []scripts.PlaceEnd
	for _, c := range cs {
		sc, err := c.score.Result()
		if err == nil && int64(math.Mod(sc, 1e6)) == c.token {
			continue // still leased by that delivery
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			continue
		}
		ends = append(ends, scripts.PlaceEnd{Member: c.member, Token: c.token})
	}
	if len(ends) == 0 {
		return 0, nil
	}
	return len(ends), run(scripts.PermitCall{Keys: fk, End: ends})
}

// heal is heal for this engine's topic.
func (p *Permits) heal(ctx context.Context) (int, error) {
	return heal(ctx, p.env.RDB, p.env.FlowKeys, p.env.Prepares, func(pc scripts.PermitCall) error {
		pc.ID = p.nextID()
		_, err := RunPermit(ctx, p.env.RDB, p.env.WakeCmd, p.env.Wake, pc)
		return err
	})
}

// splitPlace reads a delivery's place member: slot ":" id.
func splitPlace(m string) (int, string, bool) {
	for i := 0; i < len(m); i++ {
		if m[i] == ':' {
			slot, err := strconv.Atoi(m[:i])
			return slot, m[i+1:], err == nil
		}
	}
	return 0, "", false
}
