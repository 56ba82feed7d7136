package wake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
)

// Sharded wake-ups on a Redis Cluster.
//
// A slot's wake channel is a sharded channel (SPUBLISH/SSUBSCRIBE) in the
// slot's hash tag, so it lives on the master that owns the slot's keys and
// the scripts publish on it from that very node. Redis refuses one
// SSUBSCRIBE whose channels span hash slots (CROSSSLOT), and a connection
// only hears the shard channels of its own node, so the client's wake hub
// keeps one subscription connection per master for the channels of every
// topic, and sends one SSUBSCRIBE per hash slot on it. An engine's
// registration (wakeHub.register) returns once Redis confirmed each of its
// channels; its unregistration unsubscribes them (SUNSUBSCRIBE) or closes a
// connection left without channels.
//
// When a hash slot leaves a node (resharding, failover) Redis drops its
// subscribers with a "sunsubscribe" push; go-redis does not follow it. The
// shard waker then asks the cluster for the current slot map and subscribes
// again where the channel lives now. A connection that fails (node killed,
// no answer to PING, a MOVED reply) is closed and its channels are placed
// again from a fresh slot map. Every (re)subscription, once Redis confirmed
// it, marks its topic slot "look now": wake-ups published while it was
// missing are lost, so the fetcher reads that slot's head again. A periodic
// check re-reads the slot map in case a change went unnoticed.

type ShardWaker struct {
	wh Listener
	cc *redis.ClusterClient

	tune   Tuning
	ctx    context.Context // the hub's
	events chan shardEvent
	kick   chan struct{} // channels were registered: place them
	// receivers read the subscription connections, one actor each
	// (receive); run stops them once it closed the connections.
	receivers *lifecycle.Group
	// lastErr is the last failed placement's error, for a registration
	// that times out.
	lastErr atomic.Pointer[error]

	// Owned by the run goroutine.
	conns map[string]*shardConn // master address -> its subscription
	where map[string]*shardConn // channel -> the connection it was asked on

	// mu guards the registered channels, the registrations waiting for
	// their confirmation, and live: each channel mapped to the connection
	// on which Redis confirmed its subscription last, while that holds.
	mu       sync.Mutex
	channels map[string]bool
	pending  map[string][]*Reg
	live     map[string]*shardConn
}

// Reg is a registration waiting for the confirmation of its channels.
type Reg struct {
	left int
	done chan struct{}
}

// shardConn is one subscription connection to one master.
type shardConn struct {
	addr   string
	ps     *redis.PubSub
	chans  map[string]bool
	closed atomic.Bool
}

type shardEvent struct {
	conn    *shardConn
	err     error  // the connection failed
	dropped string // Redis unsubscribed this channel (its slot moved)
	// remove: channels unregistered; done is closed once they were
	// unsubscribed.
	remove []string
	done   chan struct{}
}

// NewShardWaker returns the shard waker of wh; ctx is its hub's actors'
// context, which its run and its receivers end with.
func NewShardWaker(wh Listener, tune Tuning, cc *redis.ClusterClient, ctx context.Context) *ShardWaker {
	return &ShardWaker{
		ctx:       ctx,
		receivers: lifecycle.NewGroup(ctx),
		wh:        wh,
		cc:        cc,
		tune:      tune,
		events:    make(chan shardEvent, 64),
		kick:      make(chan struct{}, 1),
		conns:     map[string]*shardConn{},
		where:     map[string]*shardConn{},
		channels:  map[string]bool{},
		pending:   map[string][]*Reg{},
		live:      map[string]*shardConn{},
	}
}

// Register notes channels as registered and returns the registration that
// waits for their confirmation (nil: every one is confirmed already:
// another engine of the client listens there too). The hub calls it under
// its lock, so that registrations and unregistrations (forget) of one
// channel reach the shard waker in the order the hub decided them.
func (s *ShardWaker) Register(chans []string) *Reg {
	reg := &Reg{done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range chans {
		s.channels[ch] = true
		if s.live[ch] == nil && !slices.Contains(s.pending[ch], reg) {
			s.pending[ch] = append(s.pending[ch], reg)
			reg.left++
		}
	}
	if reg.left == 0 {
		return nil
	}
	return reg
}

// Wait returns once Redis confirmed the subscription of reg's channels
// (chans, as given to register), or when ctx ends or the hub closes.
func (s *ShardWaker) Wait(ctx context.Context, reg *Reg, chans []string) error {
	if reg == nil {
		return nil
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	var err error
	select {
	case <-reg.done:
		return nil
	case <-ctx.Done():
		err = fmt.Errorf("sharded subscription not confirmed: %w", context.Cause(ctx))
		if last := s.lastErr.Load(); last != nil {
			err = fmt.Errorf("%w (last error: %w)", err, *last)
		}
	case <-s.ctx.Done():
		err = ErrHubClosed
	}
	s.mu.Lock()
	for _, ch := range chans {
		if i := slices.Index(s.pending[ch], reg); i >= 0 {
			s.pending[ch] = slices.Delete(s.pending[ch], i, i+1)
			if len(s.pending[ch]) == 0 {
				delete(s.pending, ch)
			}
		}
	}
	s.mu.Unlock()
	return err
}

// Forget notes that no engine listens to chans any more; the hub calls it
// under its lock (see register), then remove.
func (s *ShardWaker) Forget(chans []string) {
	s.mu.Lock()
	for _, ch := range chans {
		delete(s.channels, ch)
		delete(s.live, ch)
	}
	s.mu.Unlock()
}

// Remove unsubscribes forgotten channels and returns once that was written
// (or the hub closed). A channel registered again meanwhile is left
// subscribed (unsubscribe decides in the run goroutine).
func (s *ShardWaker) Remove(chans []string) {
	done := make(chan struct{})
	select {
	case s.events <- shardEvent{remove: chans, done: done}:
	case <-s.ctx.Done():
		return
	}
	select {
	case <-done:
	case <-s.ctx.Done():
	}
}

// Run places the registered channels and follows the cluster until the
// context given to NewShardWaker ends.
func (s *ShardWaker) Run(context.Context) {
	defer s.receivers.Stop()
	defer func() {
		for _, sc := range s.conns {
			s.closeConn(sc)
		}
	}()

	check := time.NewTicker(s.tune.CheckEvery)
	defer check.Stop()
	retry := time.NewTimer(0) // the first placement: at once
	defer retry.Stop()
	armed := true
	reload := true // the next placement reads the cluster's slot map first
	backoff := time.Duration(0)
	arm := func(d time.Duration) {
		if !armed {
			retry.Reset(d)
			armed = true
		}
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case ev := <-s.events:
			if ev.remove != nil {
				s.unsubscribe(ev.remove)
				close(ev.done)
				continue
			}
			if s.apply(ev) {
				reload = true
				arm(s.tune.Settle)
			}
		case <-s.kick:
			// New channels: placed from the slot map the client has.
			arm(0)
		case <-check.C:
			reload = true
			arm(0)
		case <-retry.C:
			armed = false
			if err := s.place(reload); err != nil {
				if s.ctx.Err() != nil {
					return
				}
				s.lastErr.Store(&err)
				reload = true
				backoff = min(max(2*backoff, 50*time.Millisecond), s.tune.RetryMax)
				s.wh.Logger().Warn("rmq: wake-up subscription incomplete; retrying", "err", err, "retry_in", backoff)
				arm(backoff)
			} else {
				reload = false
				backoff = 0
			}
		}
	}
}

// unsubscribe drops unregistered channels from their connections: one
// SUNSUBSCRIBE per hash slot, or the connection closed when none is left.
func (s *ShardWaker) unsubscribe(chans []string) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	bySlot := map[*shardConn]map[int][]string{}
	s.mu.Lock()
	again := map[string]bool{}
	for _, ch := range chans {
		if !s.channels[ch] {
			continue
		}
		// Registered again since it was forgotten (another engine of the
		// client, say one pulling the topic a closing one pushed): it
		// stays. Where its subscription still holds, that confirms the new
		// registration, which found no live subscription and waits; where
		// it does not, the placement that registration asked for
		// subscribes it.
		again[ch] = true
		if sc := s.where[ch]; sc != nil && !sc.closed.Load() {
			s.confirmLocked(sc, ch)
		}
	}
	s.mu.Unlock()
	for _, ch := range chans {
		sc := s.where[ch]
		if sc == nil || again[ch] {
			continue
		}
		delete(s.where, ch)
		delete(sc.chans, ch)
		if bySlot[sc] == nil {
			bySlot[sc] = map[int][]string{}
		}
		hs := keyspace.HashSlot(ch)
		bySlot[sc][hs] = append(bySlot[sc][hs], ch)
	}
	for sc, slots := range bySlot {
		if sc.closed.Load() {
			continue
		}
		if len(sc.chans) == 0 {
			s.closeConn(sc)
			continue
		}
		for _, chs := range slots {
			if err := sc.ps.SUnsubscribe(ctx, chs...); err != nil {
				s.wh.Logger().Debug("rmq: unsubscribe wake-ups", "node", sc.addr, "err", err)
				break
			}
		}
	}
}

// apply takes an event of a receiver; it reports whether channels need to
// be placed again.
func (s *ShardWaker) apply(ev shardEvent) bool {
	sc := ev.conn
	if sc.closed.Load() || s.conns[sc.addr] != sc {
		return false // about a connection already replaced
	}
	if ev.err != nil {
		s.wh.Logger().Info("rmq: wake-up subscription lost; subscribing again", "node", sc.addr, "err", ev.err)
		s.closeConn(sc)
		return true
	}
	if s.where[ev.dropped] == sc {
		delete(s.where, ev.dropped)
		delete(sc.chans, ev.dropped)
		if len(sc.chans) == 0 {
			s.closeConn(sc) // e.g. a master turned replica by a failover
		}
		return true
	}
	return false
}

func (s *ShardWaker) closeConn(sc *shardConn) {
	if sc.closed.Swap(true) {
		return
	}
	_ = sc.ps.Close()
	s.mu.Lock()
	for ch, on := range s.live {
		if on == sc {
			delete(s.live, ch)
		}
	}
	s.mu.Unlock()
	if s.conns[sc.addr] == sc {
		delete(s.conns, sc.addr)
	}
	for ch := range sc.chans {
		if s.where[ch] == sc {
			delete(s.where, ch)
		}
	}
}

// place subscribes every registered channel that is not subscribed on the
// master owning its hash slot now; reload: read the cluster's slot map
// afresh first (after a move or a failure, and periodically), rather than
// use the one the client has (new registrations).
func (s *ShardWaker) place(reload bool) error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	if reload {
		// ForEachMaster reloads the client's slot map from the cluster first.
		if err := s.cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); err != nil {
			return fmt.Errorf("read the cluster's slot map: %w", err)
		}
	}
	s.mu.Lock()
	chans := make([]string, 0, len(s.channels))
	for ch := range s.channels {
		chans = append(chans, ch)
	}
	s.mu.Unlock()
	sort.Strings(chans)
	type group struct {
		node  *redis.Client
		slots map[int][]string // hash slot -> channels
	}
	todo := map[string]*group{}
	var errs []error
	for _, ch := range chans {
		node, err := s.cc.MasterForKey(ctx, ch)
		if err != nil {
			errs = append(errs, fmt.Errorf("owner of %s: %w", ch, err))
			continue
		}
		addr := node.Options().Addr
		if sc := s.where[ch]; sc != nil && !sc.closed.Load() && sc.addr == addr {
			continue // in place
		}
		g := todo[addr]
		if g == nil {
			g = &group{node: node, slots: map[int][]string{}}
			todo[addr] = g
		}
		hs := keyspace.HashSlot(ch)
		g.slots[hs] = append(g.slots[hs], ch)
	}
	for addr, g := range todo {
		sc := s.conns[addr]
		fresh := sc == nil
		if fresh {
			sc = &shardConn{addr: addr, ps: g.node.SSubscribe(ctx), chans: map[string]bool{}}
			s.conns[addr] = sc
		}
		for _, chans := range g.slots {
			// One SSUBSCRIBE per hash slot: Redis refuses one that spans slots.
			if err := sc.ps.SSubscribe(ctx, chans...); err != nil {
				errs = append(errs, fmt.Errorf("SSUBSCRIBE on %s: %w", addr, err))
				s.closeConn(sc)
				break
			}
			for _, ch := range chans {
				if old := s.where[ch]; old != nil && old != sc {
					delete(old.chans, ch)
				}
				s.where[ch] = sc
				sc.chans[ch] = true
			}
		}
		if fresh && !sc.closed.Load() {
			s.receivers.Go("shard receiver", func(context.Context) { s.receive(sc) })
		}
	}
	// Connections left without channels (their slots moved) are closed.
	for _, sc := range s.conns {
		if len(sc.chans) == 0 {
			s.closeConn(sc)
		}
	}
	return errors.Join(errs...)
}

// receive reads one subscription connection until it fails or is closed.
func (s *ShardWaker) receive(sc *shardConn) {
	pinged := false
	for {
		msg, err := sc.ps.ReceiveTimeout(s.ctx, s.tune.HealthEvery)
		if sc.closed.Load() || s.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Silence: make sure the node is still there.
				if err = sc.ps.Ping(s.ctx); err == nil {
					pinged = true
					continue
				}
			}
			if pinged && err != nil && errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("no answer to PING: %w", err)
			}
			s.send(shardEvent{conn: sc, err: err})
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			s.wh.Dispatch(m.Channel, m.Payload)
		case *redis.Subscription:
			switch m.Kind {
			case "ssubscribe":
				// Wake-ups published while the channel was not subscribed
				// here are lost: its slots are looked at again.
				s.wh.LookAt(m.Channel)
				s.confirm(sc, m.Channel)
				if m.Count <= 1 {
					// A connection's first channel: pause or resume
					// payloads may have been missed while it was missing.
					s.wh.Resubscribed(false)
				}
			case "sunsubscribe":
				// Redis dropped the channel: its hash slot moved away (or
				// it was unregistered: then it is no longer in where).
				s.mu.Lock()
				if s.live[m.Channel] == sc {
					delete(s.live, m.Channel)
				}
				s.mu.Unlock()
				s.send(shardEvent{conn: sc, dropped: m.Channel})
			}
		}
	}
}

func (s *ShardWaker) send(ev shardEvent) {
	select {
	case s.events <- ev:
	case <-s.ctx.Done():
	}
}

// confirm records Redis's confirmation of a channel's subscription on sc
// and ends the registrations that waited for it.
func (s *ShardWaker) confirm(sc *shardConn, ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.confirmLocked(sc, ch)
}

func (s *ShardWaker) confirmLocked(sc *shardConn, ch string) {
	if sc.closed.Load() || !s.channels[ch] {
		return
	}
	s.live[ch] = sc
	for _, reg := range s.pending[ch] {
		if reg.left--; reg.left == 0 {
			close(reg.done)
		}
	}
	delete(s.pending, ch)
}

// SubscribedAt returns the address of the master on which Redis confirmed
// the subscription of a channel, or "" while it has none.
func (s *ShardWaker) SubscribedAt(ch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.live[ch]; sc != nil {
		return sc.addr
	}
	return ""
}
