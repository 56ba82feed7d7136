package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/rmq-go/rmq/topic"
)

// maxSlotOps bounds the slot operations (claims, takeovers, releases) that
// run at once, so a topic of thousands of slots does not start thousands of
// goroutines and ZooKeeper requests in one go.
const maxSlotOps = 64

// DefaultSessionTimeout is the ZooKeeper session timeout asked for when
// ZKConfig.SessionTimeout is 0. The server may grant another one within its
// min/max bounds; the coordinator works with the smaller of the two.
const DefaultSessionTimeout = 10 * time.Second

var (
	// ErrCoordinatorClosed is returned by calls on a closed coordinator.
	ErrCoordinatorClosed = errors.New("rmq: ZooKeeper coordinator closed")
	// ErrInvalidZKConfig is returned by NewZKCoordinator for a bad config.
	ErrInvalidZKConfig = errors.New("rmq: invalid ZooKeeper configuration")
)

// ZKConfig configures a ZKCoordinator.
type ZKConfig struct {
	// Servers are ZooKeeper's "host:port" addresses.
	Servers []string
	// SessionTimeout is the session timeout asked for (default 10s).
	SessionTimeout time.Duration
	// Root is the znode under which the coordinator keeps its nodes, e.g.
	// "/rmq/<prefix>"; workers that share a Redis prefix must share it.
	Root string
	// Logger receives the coordinator's logs (default: discard).
	Logger *slog.Logger
	// Dialer, if set, opens the TCP connections to ZooKeeper (tests use it
	// to cut the network).
	Dialer zk.Dialer
}

// ZKCoordinator assigns the slots of a process's topics through ZooKeeper so
// that each slot has at most one owner in the fleet at a time. It is the
// "one file per background actor" of ZooKeeper mode: one loop goroutine makes
// every decision, from ZooKeeper events and the results of the operations it
// starts (one goroutine each, at most one per slot at a time).
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
type ZKCoordinator struct {
	cfg   ZKConfig
	log   *slog.Logger
	paths zkPaths

	topics  []*zkTopic
	byName  map[string]*zkTopic
	granted atomic.Int64 // session timeout granted by the server (ms); 0: unknown

	// The lease as a monotonic offset from born, readable without the lock.
	born         time.Time
	vouchedUntil atomic.Int64

	conn     *zk.Conn
	zkDone   chan struct{} // go-zookeeper's goroutines ended
	ctx      context.Context
	cancel   context.CancelFunc
	opCtx    context.Context // ops; cancelled by Leave
	opCancel context.CancelFunc
	kick     chan struct{}
	wg       sync.WaitGroup // loop, heartbeat and operations

	registered chan struct{} // closed at the first registration
	startErr   chan error    // a permanent registration error, for Start

	mu          sync.Mutex
	state       int // 0 new, 1 started, 2 closed
	zkState     zk.State
	regSession  int64  // session the member is registered in; 0: none
	member      string // member id in regSession
	registering bool
	regFails    int
	regRetry    time.Time
	validUntil  time.Time // the ownership lease
	gen         uint64    // bumped when the registered session is lost
	paused      bool      // as last told to the handlers (they start paused: nothing owned)
	pauseWarned bool
	slotOps     int // slot operations running (at most maxSlotOps)
	leaving     bool
	failed      error
	regOnce     sync.Once
}

// zkTopic is the coordinator's view of one topic; guarded by ZKCoordinator.mu.
type zkTopic struct {
	t topic.Topic
	h SlotHandler

	members   zkListing
	holders   zkListing
	owners    []string // owner member per slot, from holders ("?" unknown)
	target    []string // Assign result; nil until both listings were read
	slots     []zkSlot
	acquiredN int
}

// zkListing is a watched children list.
type zkListing struct {
	names []string
	seen  bool // read at least once in the current registration
	stale bool // a change was signalled since the last read
	busy  bool
	seq   uint64 // change signals, to detect one during a read
	retry time.Time
	fails int
}

type zkSlot struct {
	held      bool // we hold the owner node in the registered session
	unsure    bool // a claim or release had an unknown outcome: check
	active    bool // the handler owns the slot (between Acquire and Release/Revoke)
	releasing bool
	revoked   bool // Revoke already told the handler (while releasing)
	busy      bool // an operation runs
	epoch     int64
	retryAt   time.Time
	fails     int
}

// NewZKCoordinator returns a coordinator; it connects on Start.
func NewZKCoordinator(cfg ZKConfig) (*ZKCoordinator, error) {
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%w: no ZooKeeper servers", ErrInvalidZKConfig)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.SessionTimeout < 100*time.Millisecond {
		return nil, fmt.Errorf("%w: session timeout %v (want at least 100ms)", ErrInvalidZKConfig, cfg.SessionTimeout)
	}
	root := strings.TrimSuffix(cfg.Root, "/")
	if !strings.HasPrefix(root, "/") || path.Clean(root) != root || root == "/" {
		return nil, fmt.Errorf("%w: root %q (want an absolute znode path like /rmq/app)", ErrInvalidZKConfig, cfg.Root)
	}
	cfg.Root = root
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &ZKCoordinator{
		cfg:        cfg,
		log:        cfg.Logger.With("zk_root", root),
		paths:      zkPaths{root: root},
		byName:     map[string]*zkTopic{},
		kick:       make(chan struct{}, 1),
		registered: make(chan struct{}),
		startErr:   make(chan error, 1),
		zkDone:     make(chan struct{}),
		born:       time.Now(),
		paused:     true,
	}, nil
}

var _ Coordinator = (*ZKCoordinator)(nil)

// Vouched reports whether the ownership lease is valid now.
func (z *ZKCoordinator) Vouched() bool {
	return int64(time.Since(z.born)) < z.vouchedUntil.Load()
}

// setLeaseLocked moves the lease; it only ever grows within a registration.
func (z *ZKCoordinator) setLeaseLocked(until time.Time) {
	z.validUntil = until
	z.vouchedUntil.Store(int64(until.Sub(z.born)))
}

// AddTopic registers a topic and the handler of its slots; before Start.
func (z *ZKCoordinator) AddTopic(t topic.Topic, h SlotHandler) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.state != 0 {
		return fmt.Errorf("rmq: AddTopic after Start")
	}
	if t.IsZero() || h == nil {
		return fmt.Errorf("%w: zero topic or nil handler", ErrInvalidZKConfig)
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
func (z *ZKCoordinator) Member() string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.member
}

// Owned returns the slots of a topic this process consumes now, with their
// owner epochs: none while its ownership is not vouched for.
func (z *ZKCoordinator) Owned(topicName string) map[int]int64 {
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

// SessionTimeout is the session timeout the coordinator works with: the
// smaller of the one asked for and the one the server granted.
func (z *ZKCoordinator) SessionTimeout() time.Duration {
	d := z.cfg.SessionTimeout
	if g := time.Duration(z.granted.Load()) * time.Millisecond; g > 0 && g < d {
		d = g
	}
	return d
}

// lease is how long a confirmed round trip vouches for the session.
func (z *ZKCoordinator) lease() time.Duration { return z.SessionTimeout() * 3 / 4 }

// Start connects to ZooKeeper, registers this worker and its topics and
// returns once registered; slots are then claimed in the background. ctx
// bounds the start only.
func (z *ZKCoordinator) Start(ctx context.Context) error {
	z.mu.Lock()
	if z.state != 0 {
		z.mu.Unlock()
		return fmt.Errorf("rmq: coordinator started twice or closed")
	}
	z.state = 1
	z.ctx, z.cancel = context.WithCancel(context.Background())
	z.opCtx, z.opCancel = context.WithCancel(z.ctx)
	z.mu.Unlock()

	opts := []func(*zk.Conn){zk.WithLogger(zkLogger{z}), zk.WithEventCallback(z.onEvent)}
	if z.cfg.Dialer != nil {
		opts = append(opts, zk.WithDialer(z.cfg.Dialer))
	}
	conn, events, err := zkConnect(z.cfg.Servers, z.cfg.SessionTimeout, opts)
	if err != nil {
		z.cancel()
		z.mu.Lock()
		z.state = 2
		z.mu.Unlock()
		close(z.zkDone)
		return fmt.Errorf("rmq: connect to ZooKeeper: %w", err)
	}
	z.conn = conn
	go func() {
		for range events { // drained so go-zookeeper never blocks; the callback acts
		}
		close(z.zkDone)
	}()
	z.wg.Add(2)
	go z.run()
	go z.heartbeat()

	select {
	case <-z.registered:
		z.log.InfoContext(ctx, "rmq: joined the fleet", "member", z.Member(), "session_timeout", z.SessionTimeout())
		return nil
	case err := <-z.startErr:
		z.Close()
		return err
	case <-ctx.Done():
		z.Close()
		return fmt.Errorf("rmq: register with ZooKeeper %v: %w", z.cfg.Servers, ctx.Err())
	}
}

// zkConnect calls zk.Connect with several options. Their type is not
// exported, but a func literal is assignable to it.
func zkConnect(servers []string, timeout time.Duration, opts []func(*zk.Conn)) (*zk.Conn, <-chan zk.Event, error) {
	return zk.Connect(servers, timeout, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
}

// Fenced is told by a handler that Redis refused a call of slot because a
// newer owner epoch is stored: the slot stopped there. The coordinator stops
// counting it as active and tries again later if it still holds the node.
func (z *ZKCoordinator) Fenced(topicName string, slot int) {
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
func (z *ZKCoordinator) Leave(ctx context.Context) error {
	z.mu.Lock()
	if z.state != 1 || z.leaving {
		z.mu.Unlock()
		return nil
	}
	z.leaving = true
	member, sid := z.member, z.regSession
	z.mu.Unlock()
	z.opCancel()
	z.poke()
	if member == "" || z.conn.SessionID() != sid {
		return nil
	}
	ops := []any{&zk.DeleteRequest{Path: z.paths.member(member), Version: -1}}
	for _, t := range z.topics {
		ops = append(ops, &zk.DeleteRequest{Path: z.paths.topicMember(t.t.Name(), member), Version: -1})
	}
	done := make(chan error, 1)
	z.wg.Add(1)
	go func() {
		defer z.wg.Done()
		_, err := z.conn.Multi(ops...)
		done <- err
	}()
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
func (z *ZKCoordinator) Close() error {
	z.mu.Lock()
	if z.state != 1 {
		z.mu.Unlock()
		return nil
	}
	z.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), z.SessionTimeout())
	_ = z.Leave(ctx)
	cancel()
	z.mu.Lock()
	z.state = 2
	z.mu.Unlock()
	z.cancel()
	z.conn.Close()
	z.wg.Wait()
	select {
	case <-z.zkDone:
	case <-time.After(10 * time.Second):
		return errors.New("rmq: ZooKeeper connection did not shut down")
	}
	return nil
}

func (z *ZKCoordinator) poke() {
	select {
	case z.kick <- struct{}{}:
	default:
	}
}

// onEvent receives every go-zookeeper event, synchronously from its
// goroutines: it only records and pokes the loop.
func (z *ZKCoordinator) onEvent(ev zk.Event) {
	z.mu.Lock()
	switch ev.Type {
	case zk.EventSession:
		z.zkState = ev.State
		if ev.State == zk.StateHasSession {
			// Watches may have fired while disconnected: read again.
			z.staleAllLocked()
		}
	case zk.EventNodeChildrenChanged:
		for _, t := range z.topics {
			switch ev.Path {
			case z.paths.topicMembers(t.t.Name()):
				t.members.signal()
			case z.paths.holders(t.t.Name()):
				t.holders.signal()
			}
		}
	case zk.EventNotWatching:
		z.staleAllLocked()
	}
	z.mu.Unlock()
	z.poke()
}

func (l *zkListing) signal() {
	l.stale = true
	l.seq++
}

func (z *ZKCoordinator) staleAllLocked() {
	for _, t := range z.topics {
		t.members.signal()
		t.holders.signal()
	}
}

// run is the decision loop.
func (z *ZKCoordinator) run() {
	defer z.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := z.step()
		timer.Reset(next)
		select {
		case <-z.ctx.Done():
			return
		case <-z.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// step makes every decision the current state calls for and returns how
// soon to look again at the latest.
func (z *ZKCoordinator) step() time.Duration {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := time.Now()
	next := time.Hour
	wake := func(at time.Time) {
		if d := at.Sub(now); d < next {
			next = max(d, time.Millisecond)
		}
	}
	if z.state != 1 {
		return next
	}
	connected := z.zkState == zk.StateHasSession
	sid := z.conn.SessionID()
	if z.regSession != 0 && connected && sid != z.regSession {
		z.loseSessionLocked()
	}
	if z.regSession == 0 && connected && !z.registering && !z.leaving && z.failed == nil {
		if now.Before(z.regRetry) {
			wake(z.regRetry)
		} else {
			z.registering = true
			z.wg.Add(1)
			go z.register()
		}
	}
	registered := z.regSession != 0 && connected && sid == z.regSession
	leaseOK := z.regSession != 0 && now.Before(z.validUntil)
	if leaseOK {
		wake(z.validUntil)
	} else {
		z.revokeAllLocked(ErrOwnershipLost)
	}
	if pause := !(registered && leaseOK); pause != z.paused {
		z.paused = pause
		for _, t := range z.topics {
			t.h.Pause(pause)
		}
		if pause {
			z.pauseWarned = true
			z.log.Warn("rmq: ZooKeeper session not confirmed: fetching paused", "connected", connected, "lease_valid", leaseOK)
		} else if z.pauseWarned {
			z.pauseWarned = false
			z.log.Info("rmq: ZooKeeper session confirmed: fetching resumed")
		}
	}
	if !registered {
		return next
	}
	for _, t := range z.topics {
		z.reconcileLocked(t, now, leaseOK && !z.leaving, wake)
	}
	return next
}

// loseSessionLocked forgets everything owned in a session that is gone: its
// ephemeral nodes were deleted when it expired.
func (z *ZKCoordinator) loseSessionLocked() {
	z.log.Warn("rmq: ZooKeeper session expired: every slot is given up", "member", z.member)
	z.revokeAllLocked(ErrOwnershipLost)
	z.gen++
	z.regSession, z.member = 0, ""
	z.setLeaseLocked(z.born)
	for _, t := range z.topics {
		for s := range t.slots {
			busy := t.slots[s].busy
			t.slots[s] = zkSlot{busy: busy}
		}
		t.members = zkListing{stale: true}
		t.holders = zkListing{stale: true}
		t.target = nil
	}
}

// revokeAllLocked tells the handlers to stop every slot still running.
func (z *ZKCoordinator) revokeAllLocked(cause error) {
	for _, t := range z.topics {
		var list []int
		for s := range t.slots {
			sl := &t.slots[s]
			if sl.active || (sl.releasing && !sl.revoked) {
				list = append(list, s)
				sl.active = false
				sl.revoked = true
			}
		}
		if len(list) > 0 {
			t.h.Revoke(list, cause)
			z.log.Warn("rmq: slots revoked", "topic", t.t.Name(), "count", len(list), "cause", cause)
		}
	}
}

// reconcileLocked refreshes a topic's listings and moves each slot one step
// towards its target.
func (z *ZKCoordinator) reconcileLocked(t *zkTopic, now time.Time, mayAct bool, wake func(time.Time)) {
	name := t.t.Name()
	for _, l := range []*zkListing{&t.members, &t.holders} {
		if (l.stale || !l.seen) && !l.busy {
			if now.Before(l.retry) {
				wake(l.retry)
				continue
			}
			l.busy, l.stale = true, false
			z.wg.Add(1)
			go z.refresh(t, l, z.gen, l.seq)
		}
	}
	if !t.members.seen || !t.holders.seen || !mayAct {
		return
	}
	if t.target == nil {
		t.target = Assign(name, t.t.SlotAmount(), t.members.names, t.owners)
	}
	for s := range t.slots {
		sl := &t.slots[s]
		if sl.busy {
			continue
		}
		if now.Before(sl.retryAt) {
			wake(sl.retryAt)
			continue
		}
		want := t.target[s] == z.member
		var op func(*zkTopic, int, uint64, int64, string)
		switch {
		case sl.unsure || (!sl.held && t.owners[s] == z.member):
			op = z.check
		case want && !sl.held && t.owners[s] == "":
			op = z.claim
		case want && sl.held && !sl.active:
			op = z.activate
		case !want && sl.held:
			op = z.release
		}
		if op != nil {
			if z.slotOps >= maxSlotOps {
				return // an ending operation pokes the loop
			}
			if !want && sl.held && !sl.unsure {
				sl.active, sl.releasing, sl.revoked = false, true, false
			}
			sl.busy = true
			z.slotOps++
			z.wg.Add(1)
			go func(t *zkTopic, s int, gen uint64, sid int64, member string) {
				defer z.wg.Done()
				op(t, s, gen, sid, member)
				z.mu.Lock()
				z.slotOps--
				z.mu.Unlock()
				z.poke()
			}(t, s, z.gen, z.regSession, z.member)
		}
	}
}

// refresh reads a watched children list.
func (z *ZKCoordinator) refresh(t *zkTopic, l *zkListing, gen, seq uint64) {
	defer z.wg.Done()
	defer z.poke()
	dir := z.paths.topicMembers(t.t.Name())
	if l == &t.holders {
		dir = z.paths.holders(t.t.Name())
	}
	names, _, _, err := z.conn.ChildrenW(dir)
	z.mu.Lock()
	defer z.mu.Unlock()
	if gen != z.gen {
		return // loseSessionLocked reset the listing
	}
	l.busy = false
	if err != nil {
		l.stale = true
		l.fails++
		l.retry = time.Now().Add(backoff(l.fails))
		if z.state == 1 {
			z.log.Debug("rmq: read ZooKeeper children", "path", dir, "err", err)
		}
		return
	}
	l.fails = 0
	l.names, l.seen = names, true
	if l.seq != seq {
		l.stale = true // changed during the read: read again
	}
	if l == &t.holders {
		owners := make([]string, t.t.SlotAmount())
		for _, n := range names {
			if s, m, ok := parseHolder(n); ok && s < len(owners) {
				owners[s] = m
			}
		}
		t.owners = owners
	}
	t.target = nil // recomputed from the new view
}

// claim creates the owner node (and its holder index entry) of a slot.
func (z *ZKCoordinator) claim(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	acl := zk.WorldACL(zk.PermAll)
	_, err := z.conn.Multi(
		&zk.CreateRequest{Path: z.paths.owner(name, s), Data: []byte(member), Acl: acl, Flags: zk.FlagEphemeral},
		&zk.CreateRequest{Path: z.paths.holder(name, s, member), Acl: acl, Flags: zk.FlagEphemeral},
	)
	held, epoch, known := false, int64(0), true
	switch {
	case errors.Is(err, zk.ErrNodeExists):
	case err != nil && !isUnknownOutcome(err):
		z.log.Warn("rmq: claim slot", "topic", name, "slot", s, "err", err)
	default:
		held, epoch, known = z.ownerOf(t, s, sid, member)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		return
	}
	switch {
	case !known:
		sl.unsure = true
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
	case held:
		sl.held, sl.epoch, sl.fails = true, epoch, 0
		t.owners[s] = member
	default:
		// Taken: wait for the holders listing to show it free again.
		if t.owners[s] == "" {
			t.owners[s] = "?"
		}
		t.holders.signal()
	}
}

// ownerOf checks whether the owner node of slot s belongs to session sid
// and returns its creation zxid. known is false when ZooKeeper could not be
// asked. An owner node that belongs to this connection's newer session (a
// claim sent just before an expiry went out in the new session) is deleted.
func (z *ZKCoordinator) ownerOf(t *zkTopic, s int, sid int64, member string) (held bool, epoch int64, known bool) {
	name := t.t.Name()
	exists, stat, err := z.conn.Exists(z.paths.owner(name, s))
	if err != nil {
		return false, 0, false
	}
	if !exists {
		return false, 0, true
	}
	if stat.EphemeralOwner == sid {
		return true, stat.Czxid, true
	}
	if stat.EphemeralOwner == z.conn.SessionID() {
		_, _ = z.conn.Multi(
			&zk.DeleteRequest{Path: z.paths.holder(name, s, member), Version: -1},
			&zk.DeleteRequest{Path: z.paths.owner(name, s), Version: stat.Version},
		)
	}
	return false, 0, true
}

// check resolves a slot whose claim or release had an unknown outcome.
func (z *ZKCoordinator) check(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	exists, _, err := z.conn.Exists(z.paths.holder(name, s, member))
	held, epoch, known := false, int64(0), err == nil
	if err == nil && exists {
		held, epoch, known = z.ownerOf(t, s, sid, member)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		return
	}
	if !known {
		sl.unsure = true
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		return
	}
	sl.unsure = false
	sl.held, sl.epoch = held, epoch
	if held {
		t.owners[s] = member
	} else if t.owners[s] == member {
		t.owners[s] = ""
		t.holders.signal()
	}
}

// activate starts a term of a held slot in the handler.
func (z *ZKCoordinator) activate(t *zkTopic, s int, gen uint64, _ int64, _ string) {
	z.mu.Lock()
	epoch := t.slots[s].epoch
	z.mu.Unlock()
	err := t.h.Acquire(z.opCtx, s, epoch)
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		if err == nil {
			t.h.Revoke([]int{s}, ErrOwnershipLost)
		}
		return
	}
	if err != nil {
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		if z.opCtx.Err() == nil {
			z.log.Error("rmq: could not start owning a slot", "topic", t.t.Name(), "slot", s, "epoch", epoch, "err", err)
		}
		return
	}
	sl.active, sl.revoked, sl.fails = true, false, 0
	t.acquiredN++
	z.log.Debug("rmq: slot owned", "topic", t.t.Name(), "slot", s, "epoch", epoch)
}

// release drains a slot in the handler, then deletes its owner node.
func (z *ZKCoordinator) release(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	err := t.h.Release(z.opCtx, s)
	if err == nil && z.conn.SessionID() == sid {
		_, err = z.conn.Multi(
			&zk.DeleteRequest{Path: z.paths.holder(name, s, member), Version: -1},
			&zk.DeleteRequest{Path: z.paths.owner(name, s), Version: -1},
		)
		if errors.Is(err, zk.ErrNoNode) {
			err = nil // gone already
		}
	} else if err == nil {
		err = zk.ErrSessionExpired
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy, sl.releasing, sl.revoked = false, false, false
	if gen != z.gen {
		return
	}
	if err != nil {
		if isUnknownOutcome(err) {
			sl.unsure = true
		}
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		return
	}
	sl.held, sl.fails = false, 0
	if t.owners[s] == member {
		t.owners[s] = ""
	}
	z.log.Debug("rmq: slot released", "topic", name, "slot", s)
}

// register creates the persistent layout, checks the topic definitions and
// creates this session's member nodes under a fresh member id.
func (z *ZKCoordinator) register() {
	defer z.wg.Done()
	defer z.poke()
	start := time.Now()
	id := uuid.NewString()
	err := z.ensureLayout()
	var sid int64
	if err == nil {
		acl := zk.WorldACL(zk.PermAll)
		ops := []any{&zk.CreateRequest{Path: z.paths.member(id), Data: z.memberInfo(), Acl: acl, Flags: zk.FlagEphemeral}}
		for _, t := range z.topics {
			ops = append(ops, &zk.CreateRequest{Path: z.paths.topicMember(t.t.Name(), id), Acl: acl, Flags: zk.FlagEphemeral})
		}
		_, err = z.conn.Multi(ops...)
		if err == nil || isUnknownOutcome(err) {
			exists, stat, e := z.conn.Exists(z.paths.member(id))
			switch {
			case e != nil:
				err = e
			case exists:
				sid, err = stat.EphemeralOwner, nil
			case err == nil:
				err = errors.New("member node vanished")
			}
		}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.registering = false
	var conflict bool
	if err != nil {
		conflict = errors.Is(err, topic.ErrConflict)
	}
	switch {
	case conflict:
		z.failed = err
		z.log.Error("rmq: cannot join the fleet", "err", err)
		select {
		case z.startErr <- err:
		default:
		}
	case err == nil && sid != 0 && sid == z.conn.SessionID():
		z.regSession, z.member, z.regFails = sid, id, 0
		z.setLeaseLocked(start.Add(z.lease()))
		for _, t := range z.topics {
			t.members = zkListing{stale: true}
			t.holders = zkListing{stale: true}
			t.target = nil
		}
		z.log.Info("rmq: registered with ZooKeeper", "member", id, "session", fmt.Sprintf("%#x", sid))
		z.regOnce.Do(func() { close(z.registered) })
	default:
		z.regFails++
		z.regRetry = time.Now().Add(backoff(z.regFails))
		if z.state == 1 {
			z.log.Warn("rmq: register with ZooKeeper", "err", err, "retry_in", time.Until(z.regRetry))
		}
	}
}

func (z *ZKCoordinator) memberInfo() []byte {
	host, _ := os.Hostname()
	names := make([]string, len(z.topics))
	for i, t := range z.topics {
		names[i] = t.t.Name()
	}
	b, _ := json.Marshal(map[string]any{"host": host, "pid": os.Getpid(), "topics": names, "since": time.Now().UTC()})
	return b
}

// ensureLayout creates the persistent nodes and stores or checks the topic
// definitions.
func (z *ZKCoordinator) ensureLayout() error {
	acl := zk.WorldACL(zk.PermAll)
	create := func(p string, data []byte) error {
		_, err := z.conn.Create(p, data, 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("rmq: create %s: %w", p, err)
		}
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(z.paths.root, "/"), "/")
	for i := range parts {
		if err := create("/"+strings.Join(parts[:i+1], "/"), nil); err != nil {
			return err
		}
	}
	for _, p := range []string{z.paths.members(), z.paths.topics()} {
		if err := create(p, nil); err != nil {
			return err
		}
	}
	for _, t := range z.topics {
		name, def := t.t.Name(), t.t.Definition()
		if err := create(z.paths.topic(name), []byte(def)); err != nil {
			return err
		}
		stored, _, err := z.conn.Get(z.paths.topic(name))
		if err != nil {
			return fmt.Errorf("rmq: read topic %s from ZooKeeper: %w", name, err)
		}
		if string(stored) != def {
			return fmt.Errorf("%w: %s is registered in ZooKeeper as %s, defined here as %s", topic.ErrConflict, name, stored, def)
		}
		for _, p := range []string{z.paths.topicMembers(name), z.paths.owners(name), z.paths.holders(name)} {
			if err := create(p, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// heartbeat keeps the ownership lease: every fifth of the session timeout
// it makes a round trip in the registered session; one that started at t
// and came back in the same session proves the session alive at the server
// after t, so it cannot expire before t + session timeout.
func (z *ZKCoordinator) heartbeat() {
	defer z.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-z.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(z.SessionTimeout() / 5)
		z.mu.Lock()
		sid, member := z.regSession, z.member
		z.mu.Unlock()
		if sid == 0 || z.conn.SessionID() != sid {
			continue
		}
		start := time.Now()
		exists, _, err := z.conn.Exists(z.paths.member(member))
		if err != nil || z.conn.SessionID() != sid {
			continue
		}
		z.mu.Lock()
		if z.regSession == sid {
			if until := start.Add(z.lease()); until.After(z.validUntil) {
				renewed := !time.Now().Before(z.validUntil)
				z.setLeaseLocked(until)
				if renewed {
					z.poke()
				}
			}
			if !exists && !warned && !z.leaving {
				warned = true
				z.log.Error("rmq: this worker's member node was deleted from outside; it takes no new slots until restarted", "member", member)
			}
		}
		z.mu.Unlock()
	}
}

// isUnknownOutcome reports whether a ZooKeeper write may or may not have
// been applied (the connection broke before the reply).
func isUnknownOutcome(err error) bool {
	switch {
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion),
		errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrInvalidPath),
		errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrInvalidACL):
		return false
	}
	return true
}

func backoff(fails int) time.Duration {
	return min(50*time.Millisecond<<min(fails, 10), 5*time.Second)
}

// zkLogger sends go-zookeeper's log lines to the coordinator's logger and
// learns the session timeout the server granted from its "authenticated"
// line (go-zookeeper does not export it).
type zkLogger struct{ z *ZKCoordinator }

func (l zkLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.z.granted.Store(int64(ms))
		}
	}
	l.z.log.Debug("zk: " + fmt.Sprintf(format, args...))
}
