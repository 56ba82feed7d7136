package consumer

import (
	"context"
	"sync"
)

// leaseHub: one sweeper and one lease keeper for every topic of the client
// (issue 15). Stub: every engine still sweeps and keeps leases on its own.
type leaseHub struct {
	h *hub
}

func newLeaseHub(h *hub) *leaseHub { return &leaseHub{h: h} }

func (l *leaseHub) start(ctx context.Context, wg *sync.WaitGroup) {}
