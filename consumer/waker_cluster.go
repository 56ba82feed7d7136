package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// Sharded wake-ups on a Redis Cluster.
//
// A slot's wake channel is a sharded channel (SPUBLISH/SSUBSCRIBE) in the
// slot's hash tag, so it lives on the master that owns the slot's keys and
// the scripts publish on it from that very node. Redis refuses one
// SSUBSCRIBE whose channels span hash slots (CROSSSLOT), and a connection
// only hears the shard channels of its own node, so the waker keeps one
// subscription connection per master and sends one SSUBSCRIBE per hash
// slot on it.
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

// shardTuning is the shard waker's timing; an engine copies
// defaultShardTuning (tests in this package shorten their engine's copy).
type shardTuning struct {
	// healthEvery is how long a subscription connection may stay silent
	// before it is PINGed; no answer within as long again fails it.
	healthEvery time.Duration
	// checkEvery is how often the slot map is re-read to catch moves that
	// no push announced.
	checkEvery time.Duration
	// settle collects a burst of events (a failover drops every channel of
	// a node, one push each) into one re-subscription.
	settle time.Duration
	// retryMax bounds the wait between failed placements.
	retryMax time.Duration
}

var defaultShardTuning = shardTuning{
	healthEvery: 3 * time.Second,
	checkEvery:  10 * time.Second,
	settle:      20 * time.Millisecond,
	retryMax:    2 * time.Second,
}

type shardWaker struct {
	w        *waker
	cc       *redis.ClusterClient
	channels []string // sorted, unique

	tune    shardTuning
	ctx     context.Context // the engine's run context, or a failed start
	cancel  context.CancelFunc
	events  chan shardEvent
	done    chan struct{} // closed when run and every receiver have ended
	recvWG  sync.WaitGroup
	lastErr atomic.Pointer[error] // of the last failed placement, for start

	// Owned by the run goroutine.
	conns map[string]*shardConn // master address -> its subscription
	where map[string]*shardConn // channel -> the connection it was asked on

	// live maps each channel to the connection on which Redis confirmed its
	// subscription last, while that holds; the first confirmation of every
	// channel ends start.
	liveMu    sync.Mutex
	live      map[string]*shardConn
	confirmed map[string]bool
	ready     chan struct{}
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
}

func newShardWaker(w *waker, cc *redis.ClusterClient) *shardWaker {
	seen := map[string]bool{}
	var chans []string
	for _, ch := range w.channels() {
		if !seen[ch] {
			seen[ch] = true
			chans = append(chans, ch)
		}
	}
	sort.Strings(chans)
	return &shardWaker{
		w:         w,
		cc:        cc,
		tune:      w.c.shards,
		channels:  chans,
		events:    make(chan shardEvent, 64),
		done:      make(chan struct{}),
		conns:     map[string]*shardConn{},
		where:     map[string]*shardConn{},
		live:      map[string]*shardConn{},
		confirmed: map[string]bool{},
		ready:     make(chan struct{}),
	}
}

// start subscribes every channel and returns once Redis confirmed each of
// them, so no wake-up published after Start returns is missed; the shard
// waker then runs until ctx ends. startCtx bounds the subscription only. On
// error nothing keeps running.
func (s *shardWaker) start(startCtx, ctx context.Context, wg *sync.WaitGroup) error {
	s.ctx, s.cancel = context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.run()
	}()
	select {
	case <-s.ready:
		return nil
	case <-startCtx.Done():
	case <-s.done:
	}
	s.cancel()
	<-s.done
	if last := s.lastErr.Load(); last != nil {
		return fmt.Errorf("sharded subscription not confirmed: %w (last error: %w)", context.Cause(startCtx), *last)
	}
	return fmt.Errorf("sharded subscription not confirmed: %w", context.Cause(startCtx))
}

func (s *shardWaker) run() {
	defer close(s.done)
	defer s.recvWG.Wait()
	defer func() {
		for _, sc := range s.conns {
			s.closeConn(sc)
		}
	}()

	check := time.NewTicker(s.tune.checkEvery)
	defer check.Stop()
	retry := time.NewTimer(0) // the first placement: at once
	defer retry.Stop()
	armed := true
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
			if s.apply(ev) {
				arm(s.tune.settle)
			}
		case <-check.C:
			arm(0)
		case <-retry.C:
			armed = false
			if err := s.place(); err != nil {
				if s.ctx.Err() != nil {
					return
				}
				s.lastErr.Store(&err)
				backoff = min(max(2*backoff, 50*time.Millisecond), s.tune.retryMax)
				s.w.c.log.Warn("rmq: wake-up subscription incomplete; retrying", "err", err, "retry_in", backoff)
				arm(backoff)
			} else {
				backoff = 0
			}
		}
	}
}

// apply takes an event of a receiver; it reports whether channels need to
// be placed again.
func (s *shardWaker) apply(ev shardEvent) bool {
	sc := ev.conn
	if sc.closed.Load() || s.conns[sc.addr] != sc {
		return false // about a connection already replaced
	}
	if ev.err != nil {
		s.w.c.log.Info("rmq: wake-up subscription lost; subscribing again", "node", sc.addr, "err", ev.err)
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

func (s *shardWaker) closeConn(sc *shardConn) {
	if sc.closed.Swap(true) {
		return
	}
	_ = sc.ps.Close()
	s.liveMu.Lock()
	for ch, on := range s.live {
		if on == sc {
			delete(s.live, ch)
		}
	}
	s.liveMu.Unlock()
	if s.conns[sc.addr] == sc {
		delete(s.conns, sc.addr)
	}
	for ch := range sc.chans {
		if s.where[ch] == sc {
			delete(s.where, ch)
		}
	}
}

// place reads the cluster's slot map afresh and subscribes every channel
// that is not subscribed on the master owning its hash slot now.
func (s *shardWaker) place() error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	// ForEachMaster reloads the client's slot map from the cluster first.
	if err := s.cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); err != nil {
		return fmt.Errorf("read the cluster's slot map: %w", err)
	}
	type group struct {
		node  *redis.Client
		slots map[int][]string // hash slot -> channels
	}
	todo := map[string]*group{}
	var errs []error
	for _, ch := range s.channels {
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
			s.recvWG.Add(1)
			go s.receive(sc)
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
func (s *shardWaker) receive(sc *shardConn) {
	defer s.recvWG.Done()
	pinged := false
	for {
		msg, err := sc.ps.ReceiveTimeout(s.ctx, s.tune.healthEvery)
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
			if s.w.message(s.ctx, m) {
				s.w.poke()
			}
		case *redis.Subscription:
			switch m.Kind {
			case "ssubscribe":
				if m.Count <= 1 {
					// A connection's first channel: pause or resume
					// payloads may have been missed while it was missing.
					s.w.c.recheckPaused(s.ctx, nil)
				}
				if s.w.lookAt(m.Channel) {
					s.confirm(sc, m.Channel)
					s.w.poke()
				}
			case "sunsubscribe":
				// Redis dropped the channel: its hash slot moved away.
				s.liveMu.Lock()
				if s.live[m.Channel] == sc {
					delete(s.live, m.Channel)
				}
				s.liveMu.Unlock()
				s.send(shardEvent{conn: sc, dropped: m.Channel})
			}
		}
	}
}

func (s *shardWaker) send(ev shardEvent) {
	select {
	case s.events <- ev:
	case <-s.ctx.Done():
	}
}

func (s *shardWaker) confirm(sc *shardConn, ch string) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if sc.closed.Load() {
		return
	}
	s.live[ch] = sc
	if s.confirmed[ch] {
		return
	}
	s.confirmed[ch] = true
	if len(s.confirmed) == len(s.channels) {
		close(s.ready)
	}
}

// subscribedAt returns the address of the master on which Redis confirmed
// the subscription of a channel, or "" while it has none.
func (s *shardWaker) subscribedAt(ch string) string {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if sc := s.live[ch]; sc != nil {
		return sc.addr
	}
	return ""
}
