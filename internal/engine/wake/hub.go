package wake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Hub: the client's one subscription to the wake channels of every
// topic. A topic no longer owns a connection or a goroutine for
// its wake-ups: its waker registers its channels here and keeps only what
// it heard (the engine's waker.go).
//
// Single node: one PubSub connection for every channel of every engine, read
// by one goroutine (receive). A registration queues its channels; whoever
// writes next (the registration itself, or the PONG of the round still out)
// sends every queued change at once (one SUBSCRIBE for the engines that
// registered meanwhile) followed by a PING with a token, and a
// registration returns once the PONG of its token came back: Redis answers
// in order, so its SUBSCRIBE was done, and no wake-up published after Start
// returns is missed. A closed engine's channels are unsubscribed (only
// those no other engine of the client listens to: a topic may be pushed and
// pulled) before its Close returns, and it is never called again.
//
// Cluster: the channels are sharded, one subscription per master for every
// topic (wake.ShardWaker), with the same registration semantics.
//
// A (re)subscription of a connection (its first confirmation: a connection
// made again after a failure resubscribes every channel) means wake-ups may
// have been missed: every registered engine's slots become unknown (on a
// cluster only the channels subscribed again), the pause state of every
// topic is read again with one HGETALL per key prefix (pauser, pause.go), every
// engine is poked after it, and the lease hub is told once.
//
// The hub also loads the scripts, once, before its first engine starts.
type Hub struct {
	rdb    redis.UniversalClient
	leases *lease.Hub // told of every resubscription
	// Tune is the subscriptions' timing (health check; the cluster's
	// placement); tests shorten it before the first registration.
	Tune Tuning
	ctx  context.Context

	// mu guards the registrations; the goroutines that call engines (the
	// receiver, the shard receivers, the pauser) hold it shared while they
	// do, so an engine unregistered under it is never called again.
	mu      sync.RWMutex
	log     *slog.Logger // the first engine's logger
	targets map[string][]wakeTarget
	wakers  map[Target]struct{}
	// expected counts the channels of the engines made on this hub so far
	// (expect): the first registration sizes targets for all of them, so
	// a client starting 1,000 topics does not grow the map 16,000 entries
	// one split at a time.
	expected int

	// Single node. ops waits for the next write (flush), which sends it
	// with PING nextTok; sentTok is the last token written, heardTok the
	// last one answered (all guarded by mu). wmu serialises the writes so
	// changes reach Redis in the order they were queued.
	ps       *redis.PubSub
	wmu      sync.Mutex
	ops      []wakeOp
	nextTok  uint64
	sentTok  uint64
	heardTok uint64
	heard    chan struct{} // closed and replaced when heardTok advances
	pingedAt time.Time     // of the last PING with a token (kick)

	shards *ShardWaker // cluster

	pauses pauser
}

// wakeTarget is one engine's slot listening on a channel.
type wakeTarget struct {
	w    Target
	slot int
}

// wakeOp is a queued change of the single node subscription.
type wakeOp struct {
	unsub bool
	chans []string
}

// wakeToken prefixes the payload of the PINGs that confirm registrations;
// the health check's PINGs carry none.
const wakeToken = "rmq-wake:"

// NewHub returns the wake hub of a client's Redis client rdb; leases is
// the client's lease hub, told when wake-ups may have been missed.
func NewHub(rdb redis.UniversalClient, leases *lease.Hub) *Hub {
	w := &Hub{
		rdb:     rdb,
		leases:  leases,
		Tune:    DefaultTuning,
		targets: map[string][]wakeTarget{},
		wakers:  map[Target]struct{}{},
		nextTok: 1,
		heard:   make(chan struct{}),
	}
	w.pauses.wh = w
	w.pauses.signal = make(chan struct{}, 1)
	return w
}

// Open loads the scripts (once per hub: hub.use calls open on first use
// only, and again after a failure) and makes the hub's subscription, which
// its actors (the pauser, and the receiver or the shard waker) then run
// with ctx; startCtx bounds the start-up calls.
func (wh *Hub) Open(startCtx, ctx context.Context) error {
	if err := scripts.Load(startCtx, wh.rdb); err != nil {
		return err
	}
	wh.ctx = ctx
	if cc, ok := wh.rdb.(*redis.ClusterClient); ok {
		wh.shards = NewShardWaker(wh, wh.Tune, cc, ctx)
		return nil
	}
	// No channel yet: the connection is made by the first registration or
	// the receiver, whichever comes first.
	wh.ps = wh.rdb.Subscribe(ctx)
	return nil
}

// Logger is the logger of the first engine registered (it logs for all).
func (wh *Hub) Logger() *slog.Logger {
	wh.mu.RLock()
	defer wh.mu.RUnlock()
	if wh.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return wh.log
}

// Register subscribes w's channels and returns once Redis confirmed them.
// On error w is not registered.
func (wh *Hub) Register(ctx context.Context, w Target) error {
	chans := w.Channels()
	wh.mu.Lock()
	if len(wh.targets) == 0 && wh.expected > len(chans) {
		wh.targets = make(map[string][]wakeTarget, wh.expected)
	}
	if wh.ctx == nil || wh.ctx.Err() != nil {
		wh.mu.Unlock()
		return ErrHubClosed
	}
	if wh.log == nil {
		wh.log = w.Logger()
	}
	// One backing array for the engine's channels (most have no other
	// engine): no allocation per channel.
	own := make([]wakeTarget, len(chans))
	for i, ch := range chans {
		own[i] = wakeTarget{w: w, slot: i}
		if ts := wh.targets[ch]; len(ts) > 0 {
			wh.targets[ch] = append(ts[:len(ts):len(ts)], own[i])
		} else {
			wh.targets[ch] = own[i : i+1 : i+1]
		}
	}
	wh.wakers[w] = struct{}{}
	tok := wh.nextTok
	// While a PING is unanswered, registrations queue: its PONG writes them
	// all at once (pong), so engines that start together share one
	// SUBSCRIBE and one PING.
	lead := false
	var reg *Reg
	if wh.shards == nil {
		wh.ops = append(wh.ops, wakeOp{chans: chans})
		lead = wh.sentTok <= wh.heardTok
	} else {
		// Under wh.mu, as unregister's forget: the shard waker learns of a
		// channel's registrations and unregistrations in the hub's order.
		reg = wh.shards.Register(chans)
	}
	wh.mu.Unlock()

	var err error
	if wh.shards != nil {
		err = wh.shards.Wait(ctx, reg, chans)
	} else {
		if lead {
			wh.flush()
		}
		err = wh.waitHeard(ctx, tok)
	}
	if err != nil {
		wh.Unregister(w)
		return err
	}
	return nil
}

// Expect notes an engine of n slot channels made on the hub (not yet
// registered).
func (wh *Hub) Expect(n int) {
	wh.mu.Lock()
	wh.expected += n
	wh.mu.Unlock()
}

// Unregister removes w's channels; those no other engine listens to are
// unsubscribed before it returns (confirmed by Redis, or after
// unsubscribeWait; on a cluster, written by the shard waker). The hub never
// calls w again.
func (wh *Hub) Unregister(w Target) {
	chans := w.Channels()
	wh.mu.Lock()
	if _, ok := wh.wakers[w]; !ok {
		wh.mu.Unlock()
		return
	}
	delete(wh.wakers, w)
	var gone []string
	for i, ch := range chans {
		ts := wh.targets[ch]
		for j, t := range ts {
			if t.w == w && t.slot == i {
				ts = append(ts[:j:j], ts[j+1:]...)
				break
			}
		}
		if len(ts) == 0 {
			delete(wh.targets, ch)
			gone = append(gone, ch)
		} else {
			wh.targets[ch] = ts
		}
	}
	tok := wh.nextTok
	lead := false
	if wh.shards == nil && len(gone) > 0 {
		// Queued like a registration (register).
		wh.ops = append(wh.ops, wakeOp{unsub: true, chans: gone})
		lead = wh.sentTok <= wh.heardTok
	}
	if wh.shards != nil && len(gone) > 0 {
		wh.shards.Forget(gone)
	}
	wh.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	if wh.shards != nil {
		wh.shards.Remove(gone)
		return
	}
	if lead {
		wh.flush()
	}
	// Redis has done it once the PING after it is answered; a Redis that
	// does not answer holds Close up only so long.
	ctx, cancel := context.WithTimeout(wh.ctx, unsubscribeWait)
	defer cancel()
	_ = wh.waitHeard(ctx, tok)
}

// unsubscribeWait bounds how long an engine's Close waits for Redis to
// confirm that its channels were unsubscribed.
const unsubscribeWait = 2 * time.Second

// flush writes every queued change, in order, then a PING with the token
// the queued registrations and unregistrations wait for. Writes run under the hub's context,
// not a caller's: one caller giving up must not break the connection all
// share.
func (wh *Hub) flush() {
	wh.wmu.Lock()
	defer wh.wmu.Unlock()
	wh.mu.Lock()
	ops := wh.ops
	wh.ops = nil
	tok := wh.nextTok
	if len(ops) > 0 {
		wh.nextTok++
	}
	wh.mu.Unlock()
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(wh.ctx, 5*time.Second)
	defer cancel()
	for i := 0; i < len(ops); {
		// Adjacent changes of one kind go in one command.
		j, n := i, 0
		for ; j < len(ops) && ops[j].unsub == ops[i].unsub; j++ {
			n += len(ops[j].chans)
		}
		chans := make([]string, 0, n)
		for _, op := range ops[i:j] {
			chans = append(chans, op.chans...)
		}
		if ops[i].unsub {
			// go-redis forgets them before it writes: a later reconnection
			// does not subscribe them again, even if this write fails.
			if err := wh.ps.Unsubscribe(ctx, chans...); err != nil && ctx.Err() == nil {
				wh.Logger().Warn("rmq: unsubscribe wake-ups", "err", err)
			}
		} else {
			// go-redis adds them to its set after the write: if the write
			// failed, the connection it made again did not subscribe them,
			// so write once more (the channels are in its set by now, and
			// any later connection subscribes them).
			if err := wh.ps.Subscribe(ctx, chans...); err != nil {
				_ = wh.ps.Subscribe(ctx, chans...)
			}
		}
		i = j
	}
	// Set before the PING: should it be lost, the receiver pings this token
	// again after the resubscription that follows.
	wh.mu.Lock()
	wh.sentTok = max(wh.sentTok, tok)
	wh.pingedAt = time.Now()
	wh.mu.Unlock()
	_ = wh.ps.Ping(ctx, wakeToken+strconv.FormatUint(tok, 10))
}

// waitHeard waits until the PONG of tok (or a later one) came back. Should
// it be slow (a PING lost with a connection that had no channel left to
// subscribe again, so no resubscription pings again), the waiter writes
// what is queued, or pings the last token again, itself.
func (wh *Hub) waitHeard(ctx context.Context, tok uint64) error {
	retry := time.NewTicker(wakeRetry)
	defer retry.Stop()
	for {
		wh.mu.RLock()
		ok, ch := wh.heardTok >= tok, wh.heard
		wh.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-retry.C:
			wh.kick()
		case <-ctx.Done():
			return fmt.Errorf("wake-up subscription not confirmed: %w", context.Cause(ctx))
		case <-wh.ctx.Done():
			return ErrHubClosed
		}
	}
}

// wakeRetry is how long a registration waits for its PONG before it writes
// or pings again.
const wakeRetry = 250 * time.Millisecond

// kick writes the queued changes, or, with none queued, pings the last
// token written again; once per wakeRetry for all waiters (many engines
// may wait at once).
func (wh *Hub) kick() {
	wh.mu.Lock()
	if time.Since(wh.pingedAt) < wakeRetry {
		wh.mu.Unlock()
		return
	}
	wh.pingedAt = time.Now()
	queued, tok := len(wh.ops) > 0, wh.sentTok
	reping := tok > wh.heardTok
	wh.mu.Unlock()
	switch {
	case queued:
		wh.flush()
	case reping:
		ctx, cancel := context.WithTimeout(wh.ctx, 5*time.Second)
		defer cancel()
		_ = wh.ps.Ping(ctx, wakeToken+strconv.FormatUint(tok, 10))
	}
}

// Receive reads the single node subscription until ctx ends. A connection
// silent for healthEvery is PINGed; with no answer within as long again it
// counts as broken (a read deadline that go-redis treats as a bad
// connection) and go-redis connects again, subscribing every channel.
func (wh *Hub) Receive(ctx context.Context) {
	// A blocked read ends only when the connection closes.
	stop := context.AfterFunc(ctx, func() { _ = wh.ps.Close() })
	defer stop()
	pinged, refused := false, false
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		var msg any
		var err error
		if pinged {
			rctx, cancel := context.WithTimeout(ctx, wh.Tune.HealthEvery)
			msg, err = wh.ps.ReceiveTimeout(rctx, 0)
			cancel()
		} else {
			msg, err = wh.ps.ReceiveTimeout(ctx, wh.Tune.HealthEvery)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if !pinged && errors.As(err, &ne) && ne.Timeout() {
				if err = wh.ps.Ping(ctx); err == nil {
					pinged = true
					continue
				}
			}
			pinged = false
			var rerr redis.Error
			if errors.As(err, &rerr) {
				// A refused command (an ACL rule without UNSUBSCRIBE, say:
				// a closed topic's channels stay subscribed, their
				// wake-ups ignored): the connection itself is fine.
				level := slog.LevelDebug
				if !refused {
					refused, level = true, slog.LevelWarn
				}
				wh.Logger().Log(ctx, level, "rmq: wake-up subscription: command refused", "err", err)
				continue
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), wh.Tune.RetryMax)
			wh.Logger().Info("rmq: wake-up subscription lost; subscribing again", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		pinged, backoff = false, 0
		switch m := msg.(type) {
		case *redis.Message:
			wh.Dispatch(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Count == 1 {
				wh.Resubscribed(true)
			}
		case *redis.Pong:
			wh.pong(m.Payload)
		}
	}
}

// pong records the answer to a registration's PING.
func (wh *Hub) pong(payload string) {
	s, ok := strings.CutPrefix(payload, wakeToken)
	if !ok {
		return
	}
	tok, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return
	}
	wh.mu.Lock()
	if tok > wh.heardTok {
		wh.heardTok = tok
		close(wh.heard)
		wh.heard = make(chan struct{})
	}
	queued := len(wh.ops) > 0 && wh.sentTok <= wh.heardTok
	wh.mu.Unlock()
	if queued {
		// Registrations that arrived while the PING was out.
		wh.flush()
	}
}

// Dispatch hands a wake-up to every engine slot listening on channel.
func (wh *Hub) Dispatch(channel, payload string) {
	wh.mu.RLock()
	defer wh.mu.RUnlock()
	for _, t := range wh.targets[channel] {
		if t.w.Message(payload, t.slot) {
			t.w.Poke()
		}
	}
}

// LookAt marks every engine slot of a channel subscribed again "look now"
// (cluster: per channel) and pokes its engine; it reports whether any
// engine listens there.
func (wh *Hub) LookAt(channel string) bool {
	wh.mu.RLock()
	defer wh.mu.RUnlock()
	ts := wh.targets[channel]
	for _, t := range ts {
		t.w.LookAt(t.slot)
		t.w.Poke()
	}
	return len(ts) > 0
}

// Resubscribed handles a connection subscribed again: wake-ups and pause
// payloads may have been missed. all: every engine's slots are unknown (the
// single node's one connection); the cluster marks its channels itself.
func (wh *Hub) Resubscribed(all bool) {
	wh.mu.RLock()
	reqs := make([]pauseReq, 0, len(wh.wakers))
	for w := range wh.wakers {
		if all {
			w.MarkAll()
		}
		// No hold, unlike after a payload: a new connection (a cluster
		// master's first, or the hub's first) would stop every topic,
		// and a Pull would find nothing, for the read's round trip.
		reqs = append(reqs, pauseReq{w: w, keep: true})
	}
	reping, tok := wh.ps != nil && wh.sentTok > wh.heardTok, wh.sentTok
	wh.mu.RUnlock()
	if reping {
		// A registration's PING may have been lost with the connection.
		_ = wh.ps.Ping(wh.ctx, wakeToken+strconv.FormatUint(tok, 10))
	}
	// The pauser pokes every engine once their pause state is read again.
	wh.pauses.queue(reqs...)
	wh.leases.Resubscribed()
}
