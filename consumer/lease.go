package consumer

import (
	"context"
	"sync"
	"time"
)

// leaseKeeper extends the leases of deliveries in flight so a long handler
// keeps its message, and cancels handlers whose lease turned out lost.
type leaseKeeper struct {
	c        *engine
	interval time.Duration
}

func newLeaseKeeper(c *engine) *leaseKeeper {
	return &leaseKeeper{c: c, interval: max(c.cfg.prepareTimeout/3, 300*time.Millisecond)}
}

func (l *leaseKeeper) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.run(ctx)
	}()
}

func (l *leaseKeeper) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bySlot := l.c.snapshotInflight()
		if len(bySlot) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, l.interval)
		lost, err := l.c.extend(cctx, bySlot)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.c.log.WarnContext(ctx, "rmq: lease extension failed", "err", err)
		}
		l.c.leaseLost(lost)
	}
}
