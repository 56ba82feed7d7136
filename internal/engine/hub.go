package engine

import (
	"context"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/engine/fetcher"
	"github.com/rmq-go/rmq/internal/engine/fetchmux"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/engine/hold"
	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/engine/wake"
	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/internal/scripts"
)

// The engines of one client share a hub (cost follows work, not
// the number of topics). What every topic used to own on its own, the hub
// does once for all of them:
//   - wake-ups: one subscription per client (per master on a cluster) for
//     every slot channel of every topic (wake.Hub);
//   - leases: one sweeper, woken by the earliest lease deadline it knows,
//     and one lease keeper for every delivery in flight (lease/hub.go);
//   - calls: fetches of different topics that are ready at once
//     group-committed into shared script calls (fetchmux), acks
//     likewise (internal/engine/ack), and the first look of starting fetchers
//     (fetcher/looks.go);
//   - holding: messages taken shortly before their instant wait in one
//     queue and are handed over together at it (hold/holder.go).
//
// rmq.Client makes one with NewHub, its engines with Hub.New, and closes
// the hub after its engines. The hub's actors (doc.go) start with its
// first engine's Start and end in Close.

// HubConfig is the client-scope part of what the hub's engines run with:
// set once for every topic of a client (rmq.Option), so no topic option
// can contradict it.
type HubConfig struct {
	// Prefix is the Redis key prefix of every topic.
	Prefix string
	// Logger logs for every engine; nil: discard.
	Logger *slog.Logger
	// Observer is told of every delivery; nil: none.
	Observer Observer
	// Middleware wraps every pushed listener, the first outermost.
	Middleware []consumer.Middleware
}

// Hub is what the engines of one client share.
type Hub struct {
	rdb redis.UniversalClient
	cfg HubConfig
	// id names the client in what it reports to Redis (the adaptive
	// limits of its topics, flow/adaptive.go).
	id string

	mu      sync.Mutex
	started bool
	closed  bool
	// actors are the hub's goroutines (the table in doc.go), started on
	// first use and stopped by Close.
	actors *lifecycle.Group

	wake   *wake.Hub
	leases *lease.Hub
	calls  *fetchmux.Mux
	acks   *ack.Mux
	looks  *fetcher.Looks // fetchers' first look (fetcher/looks.go)
	hold   *hold.Holder   // messages taken ahead of their instant (hold/holder.go)
	// starts: the definition and pause reads of engines that start at the
	// same time, in shared round trips (engine.defineAndReadPaused).
	starts *groupcommit.Group[*startRead]
	flows  flow.Registry // engines' flow control by topic, for acks by id (flow/registry.go)
	lives  lifeRegistry  // engines' life settings by topic, for acks by id (life.go)
}

// NewHub returns a hub on rdb; its goroutines start with the first Start
// of one of its engines.
func NewHub(rdb redis.UniversalClient, cfg HubConfig) *Hub {
	if cfg.Prefix == "" {
		cfg.Prefix = keyspace.DefaultPrefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	h := &Hub{rdb: rdb, cfg: cfg, id: "c" + scripts.Nonce()}
	h.actors = lifecycle.NewGroup(context.Background())
	h.leases = lease.New()
	h.wake = wake.NewHub(rdb, h.leases)
	h.starts = groupcommit.New(startRoundsInFlight, func(ctx context.Context, batch []*startRead) {
		runStartReads(ctx, h.rdb, batch)
	}, nil)
	h.calls = fetchmux.New(h.rdb)
	h.acks = ack.New(h.rdb, h.calls)
	h.looks = fetcher.NewLooks(rdb)
	h.hold = hold.New(h.rdb, h.calls)
	return h
}

// use starts the hub's goroutines on first use; it fails once the hub is
// closed.
func (h *Hub) use(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errHubClosed
	}
	if h.started {
		return nil
	}
	// The subscription is made (and the scripts loaded) before any actor
	// runs: a failure leaves nothing running, and the next Start tries
	// again.
	actx := h.actors.Context()
	if err := h.wake.Open(ctx, actx); err != nil {
		return err
	}
	h.leases.SetContext(actx)
	h.actors.Go("pauser", h.wake.RunPauser)
	if h.wake.Shards() != nil {
		h.actors.Go("shard waker", h.wake.Shards().Run)
	} else {
		h.actors.Go("wake receiver", h.wake.Receive)
	}
	h.actors.Go("sweeper", h.leases.RunSweeps)
	h.actors.Go("lease keeper", h.leases.RunKeeps)
	h.actors.Go("ack rounds", h.acks.Run)
	h.actors.Go("holder", h.hold.Run)
	h.started = true
	return nil
}

// Close stops the hub's goroutines and returns once they ended. The
// engines using it are closed before (rmq.Client.Close does that).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.actors.Stop()
}
