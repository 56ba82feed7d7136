package consumer

import (
	"context"
	"sync"
	"time"
)

// leaseHub: one sweeper and one lease keeper for every topic of the client
// (issue 15). Stub: every engine still sweeps and keeps leases on its own.
type leaseHub struct {
	h *hub
}

func newLeaseHub(h *hub) *leaseHub { return &leaseHub{h: h} }

func (l *leaseHub) start(ctx context.Context, wg *sync.WaitGroup) {}

// leased tells that c just leased messages whose leases run out at until
// at the earliest (a fetch, or a pull with the caller's lease).
func (l *leaseHub) leased(c *engine, until time.Time) {}

// heard tells that a wake-up of one of c's slots arrived: messages may be
// leased there from now (or from its due time) by any consumer.
func (l *leaseHub) heard(c *engine) {}

// resubscribed tells that wake-ups may have been missed (a subscription was
// made again): every topic is looked at once.
func (l *leaseHub) resubscribed() {}
