// Package zkcoord assigns the slots of a process's topics through ZooKeeper
// so that each slot has at most one owner in the fleet at a time
// (rmq.WithZooKeeper). It drives each topic's consumer engine through
// engine.SlotHandler.
//
// Ownership rules:
//   - a worker registers an ephemeral member node (a fresh UUID per session)
//     per topic; the target owner of every slot is Assign(members, owners);
//   - a worker claims a target slot by creating its ephemeral owner node, then
//     starts a term with SlotHandler.Acquire, passing the owner node's
//     creation zxid as the owner epoch (larger than every earlier owner's);
//   - it releases a slot that is no longer its target only after
//     SlotHandler.Release returned (in-flight deliveries ended), by deleting
//     the owner node;
//   - it holds a lease on its session: a round trip to ZooKeeper that started
//     at t proves the session alive until t + session timeout, and the
//     coordinator trusts it until t + 3/4 of that. On connection loss it
//     pauses fetching at once; when the lease runs out it revokes every slot
//     (cancelling the handlers), which happens before the session can expire
//     and before anyone else can create the owner nodes. A process frozen past
//     its session cannot do even that; the owner epoch in Redis fences it.
//
// The files follow the responsibilities: coordinator.go (configuration,
// topics, Start/Leave/Close), session.go (the connection and its events),
// lease.go (the ownership lease and the heartbeat that renews it),
// register.go (the member nodes and the persistent layout), loop.go (the
// decision loop: listings, targets, one step per slot), claims.go (the slot
// operations the loop starts), assign.go (the pure assignment), paths.go
// (the znodes), logger.go (go-zookeeper's log lines).
package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/topic"
)

// maxSlotOps bounds the slot operations (claims, takeovers, releases) that
// run at once, so a topic of thousands of slots does not start thousands of
// goroutines and ZooKeeper requests in one go.
const maxSlotOps = 64

// DefaultSessionTimeout is the ZooKeeper session timeout asked for when
// Config.SessionTimeout is 0. The server may grant another one within its
// min/max bounds; the coordinator works with the smaller of the two.
const DefaultSessionTimeout = 10 * time.Second

// ErrInvalidConfig is returned by New for a bad Config.
var ErrInvalidConfig = errors.New("rmq: invalid ZooKeeper configuration")

// errAlreadyStarted is returned by a second Start (or one after Close).
var errAlreadyStarted = errors.New("rmq: ZooKeeper coordinator already started")

// Config configures a Coordinator.
type Config struct {
	// Servers are ZooKeeper's "host:port" addresses.
	Servers []string
	// SessionTimeout is the session timeout asked for (default 10s).
	SessionTimeout time.Duration
	// Root is the znode under which the coordinator keeps its nodes, e.g.
	// "/rmq/<prefix>"; workers that share a Redis prefix must share it.
	Root string
	// Logger receives the coordinator's logs (default: discard).
	Logger *slog.Logger
	// Dialer, if set, opens the TCP connections to ZooKeeper.
	Dialer zk.Dialer
}

// Coordinator is ZooKeeper mode's coordinator. One decision loop (loop.go)
// makes every decision, from ZooKeeper events and the results of the
// operations it starts (one goroutine each, at most one per slot at a
// time); the heartbeat (lease.go) renews the ownership lease. Their state
// is guarded by mu, grouped by responsibility: the registration, the
// lease, the loop's bookkeeping and the topics' slots.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	paths zkPaths

	topics []*zkTopic
	byName map[string]*zkTopic

	sess  session
	lease lease

	// actors are the loop, the heartbeat and the operations the loop
	// starts (registration, listings, slot operations, leaving), stopped
	// by Close.
	actors   *lifecycle.Group
	opCtx    context.Context // operations: cancelled by Leave
	opCancel context.CancelFunc
	kick     chan struct{}

	mu      sync.Mutex
	phase   lifecycle.Phase
	leaving bool
	reg     registration
	gen     uint64 // bumped when the registered session is lost
	// paused is what the handlers were last told (they start paused:
	// nothing owned); pauseWarned, whether that was logged.
	paused, pauseWarned bool
	slotOps             int // slot operations running (at most maxSlotOps)
}

var _ engine.Coordinator = (*Coordinator)(nil)

// New returns a coordinator; it connects on Start.
func New(cfg Config) (*Coordinator, error) {
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", ErrInvalidConfig)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.SessionTimeout < 100*time.Millisecond {
		return nil, fmt.Errorf("%w: session timeout %v (want at least 100ms)", ErrInvalidConfig, cfg.SessionTimeout)
	}
	root := strings.TrimSuffix(cfg.Root, "/")
	if !strings.HasPrefix(root, "/") || path.Clean(root) != root || root == "/" {
		return nil, fmt.Errorf("%w: root %q (want an absolute znode path like /rmq/app)", ErrInvalidConfig, cfg.Root)
	}
	cfg.Root = root
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		cfg:    cfg,
		log:    cfg.Logger.With("zk_root", root),
		paths:  zkPaths{root: root},
		byName: map[string]*zkTopic{},
		sess:   session{asked: cfg.SessionTimeout, done: make(chan struct{})},
		lease:  lease{born: time.Now()},
		kick:   make(chan struct{}, 1),
		reg:    newRegistration(),
		paused: true,
	}, nil
}

// AddTopic registers a topic and the handler of its slots; before Start.
func (z *Coordinator) AddTopic(t topic.Topic, h engine.SlotHandler) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.phase != lifecycle.New {
		return fmt.Errorf("rmq: AddTopic after Start")
	}
	if t.IsZero() || h == nil {
		return fmt.Errorf("%w: zero topic or nil handler", ErrInvalidConfig)
	}
	if _, dup := z.byName[t.Name()]; dup {
		return fmt.Errorf("rmq: topic %s added twice", t.Name())
	}
	zt := &zkTopic{t: t, h: h, slots: make([]zkSlot, t.SlotAmount()), owners: make([]string, t.SlotAmount())}
	z.topics = append(z.topics, zt)
	z.byName[t.Name()] = zt
	return nil
}

// Member returns the member id of the current registration ("" if none).
func (z *Coordinator) Member() string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.reg.member
}

// Owned returns the slots of a topic this process consumes now, with their
// owner epochs: none while its ownership is not vouched for.
func (z *Coordinator) Owned(topicName string) map[int]int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	out := map[int]int64{}
	if t := z.byName[topicName]; t != nil && z.Vouched() {
		for s, sl := range t.slots {
			if sl.active {
				out[s] = sl.epoch
			}
		}
	}
	return out
}

// Vouched reports whether the ownership lease is valid now.
func (z *Coordinator) Vouched() bool { return z.lease.vouched() }

// SessionTimeout is the session timeout the coordinator works with: the
// smaller of the one asked for and the one the server granted.
func (z *Coordinator) SessionTimeout() time.Duration { return z.sess.timeout() }

// Start connects to ZooKeeper, registers this worker and its topics and
// returns once registered; slots are then claimed in the background. ctx
// bounds the start only.
func (z *Coordinator) Start(ctx context.Context) error {
	z.mu.Lock()
	if was := z.phase.Start(); was != lifecycle.New {
		z.mu.Unlock()
		return errAlreadyStarted
	}
	z.actors = lifecycle.NewGroup(context.Background())
	z.opCtx, z.opCancel = context.WithCancel(z.actors.Context())
	z.mu.Unlock()

	if err := z.sess.connect(z.cfg, zkLogger{z}, z.onEvent); err != nil {
		z.actors.Stop()
		z.mu.Lock()
		z.phase.Close()
		z.mu.Unlock()
		return err
	}
	z.actors.Go("zk loop", newLoop(z).run)
	z.actors.Go("zk heartbeat", newHeartbeat(z).run)

	select {
	case <-z.reg.joined:
		z.log.InfoContext(ctx, "rmq: joined the fleet", "member", z.Member(), "session_timeout", z.SessionTimeout())
		return nil
	case err := <-z.reg.startErr:
		z.Close()
		return err
	case <-ctx.Done():
		z.Close()
		return fmt.Errorf("rmq: register with ZooKeeper %v: %w", z.cfg.Servers, ctx.Err())
	}
}

// Fenced is told by a handler that Redis refused a call of slot because a
// newer owner epoch is stored: the slot stopped there. The coordinator stops
// counting it as active and tries again later if it still holds the node.
func (z *Coordinator) Fenced(topicName string, slot int) {
	z.mu.Lock()
	t := z.byName[topicName]
	if t != nil && slot >= 0 && slot < len(t.slots) {
		sl := &t.slots[slot]
		if sl.active {
			sl.active = false
			sl.fails++
			sl.retryAt = time.Now().Add(backoff(sl.fails))
		}
	}
	z.mu.Unlock()
	z.log.Warn("rmq: slot fenced by a newer owner epoch in Redis", "topic", topicName, "slot", slot)
	z.poke()
}

// Leave starts an orderly departure: no slot is claimed or acquired any
// more, operations in progress are cancelled and the member nodes are
// deleted so the others start rebalancing. The owner nodes stay until Close
// (after the handlers drained); the lease is still enforced until then.
func (z *Coordinator) Leave(ctx context.Context) error {
	z.mu.Lock()
	if z.phase != lifecycle.Started || z.leaving {
		z.mu.Unlock()
		return nil
	}
	z.leaving = true
	member, sid := z.reg.member, z.reg.session
	z.mu.Unlock()
	z.opCancel()
	z.poke()
	if member == "" || z.sess.conn.SessionID() != sid {
		return nil
	}
	ops := []any{&zk.DeleteRequest{Path: z.paths.member(member), Version: -1}}
	for _, t := range z.topics {
		ops = append(ops, &zk.DeleteRequest{Path: z.paths.topicMember(t.t.Name(), member), Version: -1})
	}
	done := make(chan error, 1)
	z.actors.Go("zk leave", func(context.Context) {
		_, err := z.sess.conn.Multi(ops...)
		done <- err
	})
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("rmq: leave the fleet: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the ZooKeeper session, which deletes this worker's owner nodes:
// call it after the handlers stopped. It waits for every goroutine the
// coordinator and go-zookeeper started.
func (z *Coordinator) Close() error {
	z.mu.Lock()
	if z.phase != lifecycle.Started {
		z.mu.Unlock()
		return nil
	}
	z.mu.Unlock()
	// Leave first (the others start claiming), then stop the loop, the
	// heartbeat and the operations, then end the session: its owner nodes
	// go only now, after the handlers drained.
	ctx, cancel := context.WithTimeout(context.Background(), z.SessionTimeout())
	_ = z.Leave(ctx)
	cancel()
	z.mu.Lock()
	z.phase.Close()
	z.mu.Unlock()
	// Closing the connection first ends the ZooKeeper calls under way, so
	// the actors' stop does not wait for them.
	z.sess.conn.Close()
	z.actors.Stop()
	return z.sess.wait(10 * time.Second)
}

func (z *Coordinator) poke() {
	select {
	case z.kick <- struct{}{}:
	default:
	}
}
