package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pauser reads the pause state of topics (Inspector.Pause) for the hub:
// after a pause or resume payload, and for every topic after a
// resubscription (a starting engine reads its own with its definition,
// engine.defineAndReadPaused). Requests that arrive while it reads share
// the next read: one HGETALL of the paused hash per key prefix, whatever
// the number of topics. Every read takes a sequence number before it
// starts, so an older read never overwrites a newer one (waker.applyPaused).
type pauser struct {
	wh     *wakeHub
	signal chan struct{}
	seq    atomic.Uint64

	mu   sync.Mutex
	reqs []pauseReq
}

// pauseReq asks for a read of w's pause state; w is poked once it is
// applied.
type pauseReq struct {
	w *waker
	// fallback is applied when Redis cannot be read (the payload's state),
	// unless keep (a resubscription: the state stays as it was).
	fallback, keep bool
	// held: w holds (waker.hold) until the read is applied (a payload).
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
func (p *pauser) recheck(w *waker, fallback bool) {
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
	set := map[*waker]bool{}
	for _, r := range reqs {
		set[r.w] = true
	}
	prefixes := map[string]bool{}
	for w := range set {
		prefixes[w.c.cfg.prefix] = true
	}
	seq := p.nextSeq()
	paused := map[string]map[string]string{}
	failed := false
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for prefix := range prefixes {
		m, err := readPausedTopics(rctx, wh.h.rdb, prefix)
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
		c      *Engine
		paused bool
	}
	var changes []change
	// Observers are told after the lock is released (applyPaused).
	defer func() {
		for _, ch := range changes {
			ch.c.pauseChanged(ch.paused)
		}
	}()
	wh.mu.RLock()
	defer wh.mu.RUnlock()
	poke := map[*waker]bool{}
	for w := range set {
		if _, live := wh.wakers[w]; !live {
			continue // unregistered meanwhile: never called again
		}
		if m, ok := paused[w.c.cfg.prefix]; ok {
			_, isPaused := m[w.c.topic.Name()]
			if w.applyPaused(seq, isPaused) {
				changes = append(changes, change{w.c, isPaused})
			}
		}
	}
	for _, r := range reqs {
		if _, live := wh.wakers[r.w]; !live {
			continue
		}
		if _, ok := paused[r.w.c.cfg.prefix]; !ok && !r.keep {
			if r.w.applyPaused(seq, r.fallback) {
				changes = append(changes, change{r.w.c, r.fallback})
			}
		}
		if r.held {
			// The payload's hold (waker.message) ends with the read.
			r.w.release()
		}
		poke[r.w] = true
	}
	for w := range poke {
		w.poke()
	}
}
