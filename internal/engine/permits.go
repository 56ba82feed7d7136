package engine

import (
	"context"
	"sync"
	"time"

	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
)

// permitValidity is how long after their grant a cluster's rate starts may
// be used by the fetch that follows (permit.lua): one interval of the rate,
// 5 to 50 ms. A client that stalls longer between the two calls (a pause,
// a starved CPU) takes nothing and gives them back, so its starts cannot
// bunch up: in any window of one period at most n + the burst + one start
// go, by the Redis clocks of the nodes (kept in step by NTP).
func permitValidity(l options.Limits) time.Duration {
	iv := l.RatePer / time.Duration(max(l.Rate, 1))
	return min(max(iv, 5*time.Millisecond), 50*time.Millisecond)
}

// permits is an engine's share of its topic's topic-wide limits on a Redis
// Cluster (docs/flow-control.md). The topic's slots lie on several nodes,
// so no slot's fetch can see the whole topic: the rate and the places
// live on the node of the topic's own hash tag (slots.FlowKeys), and the
// engine takes permits there (permit.lua) before it fetches, gives back at
// once what the fetch did not use, and gives a place back when a delivery
// ends. Places are held per engine under a lease renewed by every call
// (and by the fetcher while it holds some: keepAlive), so a killed
// process's places come free when its lease runs out. It costs a round
// trip to that node before each fetch of a limited topic, one after a
// fetch that used fewer than it took, and one per fetcher wake-up that
// gives places back.
type permits struct {
	c      *Engine
	f      *flowState
	client string

	mu   sync.Mutex
	held int // places held (topic concurrency)
	give int // places of ended deliveries not given back yet
	last time.Time
}

func newPermits(c *Engine, f *flowState) *permits {
	return &permits{c: c, f: f, client: "e" + scripts.Nonce()}
}

// limited reports whether the topic has topic-wide limits.
func (p *permits) limited() bool {
	l := p.f.current()
	return l.Rate > 0 || l.Concurrency > 0
}

// lease is how long the engine's places outlive its last call.
func (p *permits) lease() time.Duration { return max(p.c.cfg.prepareTimeout, time.Second) }

// call runs permit.lua: take want, give back give places and refund
// unused rate starts. A reply that says places came free while someone
// waited wakes the topic's consumers.
func (p *permits) call(ctx context.Context, want, give, refund int) (scripts.PermitReply, error) {
	l := p.f.current()
	pc := scripts.PermitCall{Flow: p.f.fkeys.Flow, Holders: p.f.fkeys.Holders, Permits: p.f.fkeys.Permits, Client: p.client,
		Want: want, Give: give, Refund: refund, LeaseMs: p.lease().Milliseconds(), Concurrency: l.Concurrency}
	pc.RateIv, pc.RateTol = options.GCRA(l.Rate, l.RatePer)
	keys, args := pc.Args()
	vals, err := scripts.Permit.Run(ctx, p.c.rdb, keys, args...).Slice()
	if err != nil {
		return scripts.PermitReply{}, err
	}
	r, err := scripts.ParsePermitReply(vals)
	if err != nil {
		return r, err
	}
	p.mu.Lock()
	p.last = time.Now()
	if l.Concurrency > 0 {
		p.held = max(p.held-give+r.Granted, 0)
	}
	p.mu.Unlock()
	if r.Woke {
		// Wake every consumer of the topic: they all listen on slot 0.
		if p.c.wakeCmd == "SPUBLISH" {
			p.c.rdb.SPublish(ctx, p.c.keys[0].Wake, "f")
		} else {
			p.c.rdb.Publish(ctx, p.c.keys[0].Wake, "f")
		}
	}
	return r, nil
}

// take asks for want permits before a fetch, giving back the places of
// deliveries that ended meanwhile. A failed call grants nothing and keeps
// what was to be given back.
func (p *permits) take(ctx context.Context, want int) (scripts.PermitReply, error) {
	p.mu.Lock()
	give := p.give
	p.give = 0
	p.mu.Unlock()
	return p.callGiving(ctx, want, give, 0)
}

// callGiving is call, the places it gives back counted again to give
// with the next call when it fails.
func (p *permits) callGiving(ctx context.Context, want, give, unused int) (scripts.PermitReply, error) {
	r, err := p.call(ctx, want, give, unused)
	if err != nil {
		p.mu.Lock()
		p.give += give
		p.mu.Unlock()
	}
	return r, err
}

// unused gives back n permits a fetch took and did not use.
func (p *permits) unused(ctx context.Context, n int) {
	if n <= 0 {
		return
	}
	give := 0
	if p.f.current().Concurrency > 0 {
		give = n
	}
	if _, err := p.callGiving(ctx, 0, give, n); err != nil {
		// The places stay counted until given back: next time.
		p.c.log.WarnContext(ctx, "rmq: give back unused permits", "err", err)
	}
}

// ended notes that a delivery ended: its place goes back with the next
// call (the fetcher is woken for it).
func (p *permits) ended() {
	if p.f.current().Concurrency == 0 {
		return
	}
	p.mu.Lock()
	p.give++
	p.mu.Unlock()
}

// pending reports whether places wait to be given back, and when the
// lease of the places held must be renewed (zero: none held).
func (p *permits) pending() (give bool, renew time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held > 0 {
		renew = p.last.Add(p.lease() / 3)
	}
	return p.give > 0, renew
}

// flush gives back what ended and renews the lease of the places held.
func (p *permits) flush(ctx context.Context) {
	if _, err := p.take(ctx, 0); err != nil {
		p.c.log.WarnContext(ctx, "rmq: give back permits", "err", err)
	}
}
