package pull

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
)

// queueWatch tells long polls when a queue they name comes to exist. A
// consume of a queue never published to must not create it (no topic
// definition, no wake-up subscription, no pull engine: a read writes
// nothing), yet a long poll on it must get the first job published to it,
// as lmstfy's BRPOP on a missing list does. A publish through this process
// tells the watch at once (defined); one through another process or a Go
// producer is seen by the watch's poll of the topic definitions, one HMGET
// of every waited name each watchPoll while any long poll waits on one.
type queueWatch struct {
	rdb  redis.UniversalClient
	key  string // the library's topic definitions hash
	log  *slog.Logger
	kick chan struct{} // a first waiter arrived

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // topic name -> waiters

	loops *lifecycle.Group // run
}

// watchPoll is how often the watch reads the definitions of waited names:
// what a long poll on a new queue may lag behind a publish through another
// process.
const watchPoll = 200 * time.Millisecond

func newQueueWatch(rdb redis.UniversalClient, prefix string, log *slog.Logger) *queueWatch {
	w := &queueWatch{rdb: rdb, key: keyspace.TopicsKey(prefix), log: log, kick: make(chan struct{}, 1),
		waiters: map[string]map[chan struct{}]struct{}{}, loops: lifecycle.NewGroup(context.Background())}
	w.loops.Go("rmqd queue watch", w.run)
	return w
}

// close stops the poll and returns once its goroutine ended.
func (w *queueWatch) close() { w.loops.Stop() }

// Wait registers a waiter for names; ch is closed (once) when one of them
// comes to exist. cancel unregisters it.
func (w *queueWatch) Wait(names []string) (ch chan struct{}, cancel func()) {
	ch = make(chan struct{})
	w.mu.Lock()
	for _, n := range names {
		m := w.waiters[n]
		if m == nil {
			m = map[chan struct{}]struct{}{}
			w.waiters[n] = m
		}
		m[ch] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return ch, func() {
		w.mu.Lock()
		for _, n := range names {
			if m := w.waiters[n]; m != nil {
				delete(m, ch)
				if len(m) == 0 {
					delete(w.waiters, n)
				}
			}
		}
		w.mu.Unlock()
	}
}

// defined tells the waiters of name that it exists now.
func (w *queueWatch) defined(name string) {
	w.mu.Lock()
	m := w.waiters[name]
	delete(w.waiters, name)
	w.mu.Unlock()
	for ch := range m {
		w.fire(ch)
	}
}

// fire closes ch unless another name of the same waiter closed it first.
func (w *queueWatch) fire(ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (w *queueWatch) Names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.waiters))
	for n := range w.waiters {
		out = append(out, n)
	}
	return out
}

// run polls the definitions of the waited names while there are any.
func (w *queueWatch) run(ctx context.Context) {
	t := time.NewTicker(watchPoll)
	defer t.Stop()
	for {
		names := w.Names()
		if len(names) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		vals, err := w.rdb.HMGet(ctx, w.key, names...).Result()
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "rmqd: reading queue definitions for long polls", "err", err)
			}
			continue
		}
		for i, v := range vals {
			if v != nil {
				w.defined(names[i])
			}
		}
	}
}
