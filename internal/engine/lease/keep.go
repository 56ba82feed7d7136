package lease

import (
	"context"
	"sync"
	"time"
)

// RunKeeps is the one lease keeper: it sleeps until the earliest engine's
// extension is due and starts the extensions due, one goroutine each, and
// returns once they ended.
func (l *Hub) RunKeeps(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		l.mu.Lock()
		next := now.Add(time.Hour)
		if top := l.keeps.Peek(); top != nil {
			next = top.At
		}
		l.mu.Unlock()
		if wait := next.Sub(now); wait > 0 {
			resetTimer(t, wait)
			select {
			case <-ctx.Done():
				return
			case <-l.keepKick:
				continue
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		now = time.Now()
		l.mu.Lock()
		for top := l.keeps.Peek(); top != nil && !top.At.After(now); top = l.keeps.Peek() {
			l.keeps.Pop()
			st := top.V
			st.leasedAgain = false
			st.keepUse.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.keepOne(ctx, st, now)
			}()
		}
		l.mu.Unlock()
	}
}

// keepOne extends st's leases once and schedules the next extension if
// anything is in flight (or was leased since the snapshot).
func (l *Hub) keepOne(ctx context.Context, st *state, started time.Time) {
	busy := st.c.Keep(ctx, st.interval)
	l.mu.Lock()
	if !st.keepClosed {
		if busy || st.leasedAgain {
			st.leasedAgain = false
			l.keeps.Set(&st.keep, started.Add(st.interval))
			poke(l.keepKick)
		} else {
			st.keeping = false
		}
	}
	l.mu.Unlock()
	st.keepUse.Done()
}
