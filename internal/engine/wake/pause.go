package wake

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rmq-go/rmq/internal/keyspace"
)

// pauser reads the pause state of topics (Inspector.Pause) for the hub:
// after a pause or resume payload, and for every topic after a
// resubscription (a starting engine reads its own with its definition,
// the engine's defineAndReadPaused). Requests that arrive while it reads share
// the next read: one HGETALL of the paused hash per key prefix, whatever
// the number of topics. Every read takes a sequence number before it
// starts, so an older read never overwrites a newer one (Target.ApplyPaused).
type pauser struct {
	wh     *Hub
	signal chan struct{}
	seq    atomic.Uint64

	mu   sync.Mutex
	reqs []pauseReq
}

// pauseReq asks for a read of w's pause state; w is poked once it is
// applied.
type pauseReq struct {
	w Target
	// fallback is applied when Redis cannot be read (the payload's state),
	// unless keep (a resubscription: the state stays as it was).
	fallback, keep bool
	// held: w holds (the engine's waker.hold) until the read is applied (a payload).
	held bool
}

// nextSeq numbers a read of the pause state about to start.
func (p *pauser) nextSeq() uint64 { return p.seq.Add(1) }

func (p *pauser) queue(reqs ...pauseReq) {
	p.mu.Lock()
	p.reqs = append(p.reqs, reqs...)
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// recheck reads w's pause state again after a pause or resume payload and
// pokes it. The payload itself is not trusted: a Pause and a Resume that
// interleave (HSET, HDEL, publish r, publish p) would leave it wrong, while
// Inspector writes the hash before it publishes, so a read that starts
// after the payload was heard sees that state or a newer one. fallback (the
// payload's state) is applied when Redis cannot be read.
func (p *pauser) recheck(w Target, fallback bool) {
	p.queue(pauseReq{w: w, fallback: fallback, held: true})
}

func (p *pauser) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.signal:
		}
		p.mu.Lock()
		reqs := p.reqs
		p.reqs = nil
		p.mu.Unlock()
		p.round(ctx, reqs)
	}
}

func (p *pauser) round(ctx context.Context, reqs []pauseReq) {
	wh := p.wh
	set := map[Target]bool{}
	for _, r := range reqs {
		set[r.w] = true
	}
	prefixes := map[string]bool{}
	for w := range set {
		prefixes[w.Prefix()] = true
	}
	seq := p.nextSeq()
	paused := map[string]map[string]string{}
	failed := false
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for prefix := range prefixes {
		m, err := readPausedTopics(rctx, wh.rdb, prefix)
		if err != nil {
			if !failed && ctx.Err() == nil {
				wh.Logger().Warn("rmq: could not read the pause state", "err", err)
			}
			failed = true
			continue
		}
		paused[prefix] = m
	}
	cancel()

	type change struct {
		w      Target
		paused bool
	}
	var changes []change
	// Observers are told after the lock is released (ApplyPaused).
	defer func() {
		for _, ch := range changes {
			ch.w.PauseChanged(ch.paused)
		}
	}()
	wh.mu.RLock()
	defer wh.mu.RUnlock()
	poke := map[Target]bool{}
	for w := range set {
		if _, live := wh.wakers[w]; !live {
			continue // unregistered meanwhile: never called again
		}
		if m, ok := paused[w.Prefix()]; ok {
			_, isPaused := m[w.TopicName()]
			if w.ApplyPaused(seq, isPaused) {
				changes = append(changes, change{w, isPaused})
			}
		}
	}
	for _, r := range reqs {
		if _, live := wh.wakers[r.w]; !live {
			continue
		}
		if _, ok := paused[r.w.Prefix()]; !ok && !r.keep {
			if r.w.ApplyPaused(seq, r.fallback) {
				changes = append(changes, change{r.w, r.fallback})
			}
		}
		if r.held {
			// The payload's hold (Target.Message) ends with the read.
			r.w.Release()
		}
		poke[r.w] = true
	}
	for w := range poke {
		w.Poke()
	}
}

// readPausedTopics reads the paused hash of a key prefix (Inspector.Pause
// writes it): the names of its paused topics. One read serves every topic
// of the prefix (the hub's pauser).
func readPausedTopics(ctx context.Context, rdb redis.UniversalClient, prefix string) (map[string]string, error) {
	m, err := rdb.HGetAll(ctx, keyspace.PausedKey(prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: read the pause state of prefix %s: %w", prefix, err)
	}
	return m, nil
}
