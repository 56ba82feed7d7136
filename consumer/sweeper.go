package consumer

import (
	"context"
	"sync"
	"time"
)

// sweeper rolls back deliveries whose lease ran out: their consumer died or
// lost Redis. Every consumer of a topic sweeps; the scripts make concurrent
// sweeps harmless.
type sweeper struct {
	c *engine
}

func newSweeper(c *engine) *sweeper { return &sweeper{c: c} }

func (s *sweeper) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.run(ctx)
	}()
}

func (s *sweeper) run(ctx context.Context) {
	t := time.NewTicker(s.c.cfg.sweepInterval)
	defer t.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sweeper) once(ctx context.Context) {
	c := s.c
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.sweepInterval, time.Second))
	defer cancel()
	cands, err := c.expiredCandidates(ctx, c.own.activeSlots(), c.clock.now())
	if err != nil || len(cands) == 0 {
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "rmq: sweep failed", "err", err)
		}
		return
	}
	rolled, dead, exp, err := c.sweep(ctx, cands)
	if err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "rmq: sweep failed", "err", err)
	}
	if exp > 0 {
		expired(c.cfg.observer, c.topic.Name(), exp)
		c.log.InfoContext(ctx, "rmq: dropped expired messages", "count", exp)
	}
	if rolled > 0 {
		c.cfg.observer.LeasesExpired(c.topic.Name(), rolled, len(dead))
		c.log.InfoContext(ctx, "rmq: rolled back expired leases", "count", rolled, "dead", len(dead))
	}
	// Each dead-lettered message at Warn, as a handler's dead-lettering is
	// (logOutcome): nobody handles it any more unless someone looks.
	for _, d := range dead {
		c.log.WarnContext(ctx, "rmq: message moved to the dead queue", "id", d.id, "slot", d.slot,
			"attempts", d.attempts, "last_error", leaseExpiredError)
	}
}

// leaseExpiredError is the last error sweep.lua records for a delivery
// whose lease ran out.
const leaseExpiredError = "rmq: lease expired"
