package life

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// ErrWaiterClosed is returned by Add once the Waiter is closed.
var ErrWaiterClosed = errors.New("rmq: client closed")

// waitersTTL bounds how long a registration outlives the last one made
// on its slot when no end of its message ever comes (a removed message):
// the scripts forget a finished id's waiters, nothing else does.
const waitersTTL = 24 * time.Hour

// Waiter tells the Wait calls of one client when their messages finish.
// It holds one subscription per finish channel (a topic slot's) that has
// waits, shared by them, so any number of waits on a slot cost Redis one
// subscription and nothing while nothing finishes: a finishing script
// publishes only for an id registered in the slot's waiters hash.
type Waiter struct {
	rdb    redis.UniversalClient
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	chans map[string]*finChan
}

// finChan is one finish channel's subscription and its waits by id.
type finChan struct {
	ch    string
	refs  int
	ps    *redis.PubSub
	ready chan struct{} // closed at the subscription's first confirmation
	err   error         // set before ready closes when subscribing failed
	waits map[string]map[*Wait]struct{}
}

// Wait is one call's registration for an id.
type Wait struct {
	// C receives the finish word of the id (at most one is sent).
	C <-chan Finish
	// Recheck is signalled when the subscription was made again after a
	// failure: words may have been missed, so the state must be read.
	Recheck <-chan struct{}
	// Registered is the id's count in the waiters hash once this wait
	// registered. Counts only grow until a finish forgets the id (the
	// scripts' word goes with it): a count now below it, or none, means
	// the id finished since.
	Registered int64

	c       chan Finish
	recheck chan struct{}
	w       *Waiter
	ch, id  string
	once    sync.Once
}

// NewWaiter returns a Waiter on rdb; Close ends it.
func NewWaiter(rdb redis.UniversalClient) *Waiter {
	ctx, cancel := context.WithCancel(context.Background())
	return &Waiter{rdb: rdb, ctx: ctx, cancel: cancel, chans: map[string]*finChan{}}
}

// Close ends every subscription and waits for their goroutines. Waits
// under way see their context end or get nothing more.
func (w *Waiter) Close() {
	w.mu.Lock()
	w.cancel()
	for ch, fc := range w.chans {
		_ = fc.ps.Close()
		delete(w.chans, ch)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// Add registers a wait for id in the slot of lk: once it returns, the
// subscription is confirmed and the id registered, so a finish after it
// is told on the Wait's C (or, after a lost connection, on Recheck). The
// caller reads the id's state next (it may have finished before) and
// calls Done when it stops waiting.
func (w *Waiter) Add(ctx context.Context, lk keyspace.LifeKeys, id string) (*Wait, error) {
	wt := &Wait{c: make(chan Finish, 1), recheck: make(chan struct{}, 1), w: w, ch: lk.Finish, id: id}
	wt.C, wt.Recheck = wt.c, wt.recheck
	w.mu.Lock()
	if w.ctx.Err() != nil {
		w.mu.Unlock()
		return nil, ErrWaiterClosed
	}
	fc := w.chans[lk.Finish]
	if fc == nil {
		fc = &finChan{ch: lk.Finish, ready: make(chan struct{}), waits: map[string]map[*Wait]struct{}{}}
		fc.ps = w.subscribe(lk.Finish)
		w.chans[lk.Finish] = fc
		w.wg.Add(1)
		go w.receive(fc)
	}
	fc.refs++
	if fc.waits[id] == nil {
		fc.waits[id] = map[*Wait]struct{}{}
	}
	fc.waits[id][wt] = struct{}{}
	w.mu.Unlock()

	select {
	case <-fc.ready:
	case <-ctx.Done():
		wt.Done()
		return nil, ctx.Err()
	}
	if fc.err != nil {
		wt.Done()
		return nil, fc.err
	}
	var incr *redis.IntCmd
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.HIncrBy(ctx, lk.Waiters, id, 1)
		p.PExpire(ctx, lk.Waiters, waitersTTL)
		return nil
	})
	if err != nil {
		wt.Done()
		return nil, fmt.Errorf("rmq: wait for %s: %w", id, err)
	}
	wt.Registered = incr.Val()
	return wt, nil
}

// Done ends the wait; the subscription goes with its last wait. Its
// registration in Redis stays until the id finishes (another process may
// wait for it too, and a count going down could race one going up).
func (wt *Wait) Done() {
	wt.once.Do(func() {
		w := wt.w
		w.mu.Lock()
		defer w.mu.Unlock()
		fc := w.chans[wt.ch]
		if fc == nil {
			return
		}
		if ws := fc.waits[wt.id]; ws != nil {
			delete(ws, wt)
			if len(ws) == 0 {
				delete(fc.waits, wt.id)
			}
		}
		if fc.refs--; fc.refs == 0 {
			_ = fc.ps.Close()
			delete(w.chans, wt.ch)
		}
	})
}

// subscribe opens the subscription of one channel: sharded on a cluster,
// where the scripts publish with SPUBLISH.
func (w *Waiter) subscribe(ch string) *redis.PubSub {
	if cc, ok := w.rdb.(*redis.ClusterClient); ok {
		return cc.SSubscribe(w.ctx, ch)
	}
	return w.rdb.Subscribe(w.ctx, ch)
}

// receive reads one subscription until it is closed.
func (w *Waiter) receive(fc *finChan) {
	defer w.wg.Done()
	confirmed := false
	pause := 10 * time.Millisecond
	for {
		msg, err := fc.ps.Receive(w.ctx)
		if err != nil {
			if w.closed(fc) {
				if !confirmed {
					fc.err = ErrWaiterClosed
					close(fc.ready)
				}
				return
			}
			// Redis away: go-redis dials again on the next Receive and
			// subscribes again; that confirmation asks for a recheck.
			t := time.NewTimer(pause)
			select {
			case <-w.ctx.Done():
				t.Stop()
			case <-t.C:
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
				continue
			}
			if !confirmed {
				confirmed = true
				close(fc.ready)
				continue
			}
			w.each(fc, func(wt *Wait) {
				select {
				case wt.recheck <- struct{}{}:
				default:
				}
			})
		case *redis.Message:
			f, err := ParseFinish(m.Payload)
			if err != nil {
				continue
			}
			w.mu.Lock()
			for wt := range fc.waits[f.ID] {
				select {
				case wt.c <- f:
				default:
				}
			}
			w.mu.Unlock()
		}
	}
}

// closed reports whether fc's subscription was closed (by Done or Close).
func (w *Waiter) closed(fc *finChan) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctx.Err() != nil || w.chans[fc.ch] != fc
}

// each calls f for every wait of fc.
func (w *Waiter) each(fc *finChan, f func(*Wait)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ws := range fc.waits {
		for wt := range ws {
			f(wt)
		}
	}
}
