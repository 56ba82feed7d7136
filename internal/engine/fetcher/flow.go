package fetcher

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/internal/engine/redisops"
)

// noteFlow folds a fetch's word on the topic's limits into the fetcher.
func (f *Fetcher) noteFlow(r redisops.FetchResult) {
	switch {
	case r.TopicWait > 0:
		f.flowUntil, f.flowBlocked = r.TopicWait, false
	case r.TopicWait < 0:
		f.flowBlocked, f.flowRecheck = true, r.TopicRecheck
	default:
		f.flowUntil, f.flowBlocked = 0, false
	}
}

// flowWait reports whether a topic limit holds fetching back now; with a
// rate it lowers *wait to the time it allows the next start. (Reading the
// clock only when a rate wait is known keeps the common path as it was.)
func (f *Fetcher) flowWait(wait *time.Duration) bool {
	if f.flowBlocked {
		if f.flowRecheck <= 0 {
			return true
		}
		// A cluster's places: also when the first lease runs out (a
		// killed client's places free then, and nobody says so).
		f.c.SyncClock()
		d := f.p.Clock.UntilMs(f.flowRecheck)
		if d <= 0 {
			f.flowBlocked, f.flowRecheck = false, 0
			return false
		}
		*wait = min(*wait, d)
		return true
	}
	if f.flowUntil == 0 {
		return false
	}
	c := f.c
	c.SyncClock()
	d := f.p.Clock.UntilMs(f.flowUntil)
	if d <= 0 {
		f.flowUntil = 0
		return false
	}
	*wait = min(*wait, d)
	return true
}

// flowHousekeeping gives a cluster's permits back for deliveries that
// ended, and renews the lease of the places held when due.
func (f *Fetcher) flowHousekeeping(ctx context.Context) {
	pm := f.p.Flow.Permits()
	if pm == nil {
		return
	}
	give, renew := pm.Pending()
	if give || (!renew.IsZero() && !time.Now().Before(renew)) {
		pm.Flush(ctx)
	}
}

// permitWait bounds a fetcher's sleep by the renewal of its permits'
// lease.
func (f *Fetcher) permitWait(wait time.Duration) time.Duration {
	pm := f.p.Flow.Permits()
	if pm == nil {
		return wait
	}
	if _, renew := pm.Pending(); !renew.IsZero() {
		wait = min(wait, max(time.Until(renew), time.Millisecond))
	}
	return wait
}
