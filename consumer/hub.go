package consumer

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/consumerctl"
	"github.com/rmq-go/rmq/internal/groupcommit"
)

// The engines of one client share a hub (issue 15: cost follows work, not
// the number of topics). What every topic used to own on its own, the hub
// does once for all of them:
//   - wake-ups: one subscription per client (per master on a cluster) for
//     every slot channel of every topic (hub_wake.go);
//   - leases: one sweeper, woken by the earliest lease deadline it knows,
//     and one lease keeper for every delivery in flight (hub_leases.go);
//   - calls: fetches of different topics that are ready at once
//     group-committed into shared script calls (hub_calls.go), acks
//     likewise (hub_acks.go), and the first look of starting fetchers
//     (hub_looks.go);
//   - holding: messages taken shortly before their instant wait in one
//     queue and are handed over together at it (hub_hold.go).
//
// rmq.Client makes one with consumerctl.NewShared and closes it after its
// engines; an engine made without one (the package's own tests) makes a
// private hub and closes it with itself. The hub's goroutines start with
// its first engine's Start and end in Close, in the start(ctx, wg) style of
// internal/lifecycle.

func init() {
	consumerctl.NewShared = func(rdb redis.UniversalClient) consumerctl.Shared { return newHub(rdb) }
}

type hub struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	started bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	wake   *wakeHub
	leases *leaseHub
	calls  *callMux
	acks   *ackMux
	looks  *groupcommit.Group[*lookReq] // fetchers' first look (hub_looks.go)
	hold   *holder                      // messages taken ahead of their instant (hub_hold.go)
}

func newHub(rdb redis.UniversalClient) *hub {
	h := &hub{rdb: rdb}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.wake = newWakeHub(h)
	h.leases = newLeaseHub(h)
	h.calls = newCallMux(h)
	h.acks = newAckMux(h)
	h.looks = newLooks(rdb)
	h.hold = newHolder(h)
	return h
}

// hubOf returns the shared hub of p, or a private one (own is true).
func hubOf(rdb redis.UniversalClient, s consumerctl.Shared) (h *hub, own bool) {
	if h, ok := s.(*hub); ok && h != nil {
		return h, false
	}
	return newHub(rdb), true
}

// use starts the hub's goroutines on first use; it fails once the hub is
// closed.
func (h *hub) use(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errHubClosed
	}
	if h.started {
		return nil
	}
	if err := h.wake.start(ctx, h.ctx, &h.wg); err != nil {
		return err
	}
	h.leases.start(h.ctx, &h.wg)
	h.calls.start(h.ctx, &h.wg)
	h.acks.start(h.ctx, &h.wg)
	h.hold.start(h.ctx, &h.wg)
	h.started = true
	return nil
}

// Close stops the hub's goroutines and returns once they ended. The
// engines using it are closed before (rmq.Client.Close does that).
func (h *hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}
