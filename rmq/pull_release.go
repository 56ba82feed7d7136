package rmq

import (
	"context"
	"errors"
	"time"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/lifecycle"
)

// releaseSweepSlack is how long after its last lease ran out an idle pull
// engine is kept: leases end on whole seconds and the engine's sweeper rolls
// back, at their end, the ones never acked; a released engine sweeps no
// more (a new one does, when it starts).
const releaseSweepSlack = 2 * time.Second

// letGo ends a Pull's (or NackByID's) hold on its entries; leasedUntil is
// when the leases it handed out run out (zero: none).
func (c *Client) letGo(entries []*pullEntry, leasedUntil time.Time) {
	if len(entries) == 0 {
		return
	}
	now := time.Now()
	c.mu.Lock()
	for _, e := range entries {
		e.users--
		e.used = now
		if leasedUntil.After(e.leasedUntil) {
			e.leasedUntil = leasedUntil
		}
	}
	c.mu.Unlock()
}

// ReleaseIdlePulls closes the pull engines (each a wake-up subscription and
// a place in the sweeper) of the topics that no Pull or NackByID has held
// for at least idle, and whose last leases ran out long enough ago to have
// been swept; a later Pull of such a topic makes a new engine. It returns
// how many it closed, once they are closed. A service that pulls topics
// its callers name calls it now and then, so that engines of topics pulled
// once do not pile up.
func (c *Client) ReleaseIdlePulls(ctx context.Context, idle time.Duration) (int, error) {
	now := time.Now()
	var idleOnes []*engine.Engine
	c.mu.Lock()
	if c.phase == lifecycle.Closed || len(c.pulls.byTopic) == 0 {
		c.mu.Unlock()
		return 0, nil
	}
	for name, e := range c.pulls.byTopic {
		if e.p == nil || e.users > 0 || now.Sub(e.used) < idle || now.Before(e.leasedUntil.Add(releaseSweepSlack)) {
			continue
		}
		delete(c.pulls.byTopic, name)
		idleOnes = append(idleOnes, e.p)
	}
	// Close waits for these closes as for starts under way.
	c.pulls.starting.Add(1)
	c.mu.Unlock()
	defer c.pulls.starting.Done()
	var errs []error
	for _, p := range idleOnes {
		errs = append(errs, p.Close(ctx))
	}
	return len(idleOnes), errors.Join(errs...)
}
