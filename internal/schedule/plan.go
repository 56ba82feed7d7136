package schedule

import (
	"time"
)

// Bounds of one roll of one schedule: at most maxCatchUp missed ticks are
// fired (the youngest; older ones count as skipped), and at most
// maxCounted missed ticks are counted one by one (a schedule of every
// second stopped for a year would otherwise take seconds of CPU to
// count); past that the count jumps to the catch-up window, so Skipped is
// then a lower bound.
const (
	maxCatchUp = 1000
	maxCounted = 100_000
)

// lateGrace: a tick less than this overdue when a scheduler rolls it is
// fired whatever the catch-up says. A running fleet rolls a tick 0.2-0.3 s
// after the one before (rollDelay, jitter), and ticks are a second apart
// at least; one that finds the next tick passed was slowed down (a loaded
// machine, a pause of the process, a Redis failover) rather than gone, and
// its tick is late, not missed.
const lateGrace = time.Second

// Parse reads the spec and location of a stored definition.
func (d Def) Parse() (Spec, error) {
	loc, err := LoadLocation(d.Location)
	if err != nil {
		return Spec{}, err
	}
	return Parse(d.Spec, loc)
}

// rollPlan is what one schedule.lua roll does for one schedule.
type rollPlan struct {
	name    string
	ver     int64
	skipped int64
	ticks   []int64 // missed ticks fired now, then the new pending tick
}

// plan rolls st forward at now (Redis's clock): its pending tick has come
// due (fired); the ticks after it up to now were missed (no scheduler sent
// them ahead): those at most catchUp (or lateGrace) old are fired now, each
// once, and the older ones skipped; the first tick after now becomes the
// pending one.
func plan(name string, st State, spec Spec, catchUp time.Duration, now time.Time) rollPlan {
	p := rollPlan{name: name, ver: st.Ver}
	t := spec.Next(time.UnixMilli(st.Next))
	oldest := now.Add(-max(catchUp, lateGrace))
	for n := 0; !t.IsZero() && !t.After(now); n++ {
		if n == maxCounted && t.Before(oldest) {
			t = spec.Next(oldest.Add(-time.Millisecond))
			continue
		}
		if t.Before(oldest) {
			p.skipped++
		} else {
			p.ticks = append(p.ticks, t.UnixMilli())
		}
		t = spec.Next(t)
	}
	if over := len(p.ticks) - maxCatchUp; over > 0 {
		p.ticks = p.ticks[over:]
		p.skipped += int64(over)
	}
	// No tick within five years (Parse refuses such specs, and cron fields
	// repeat within four): 0, no pending tick, the schedule stops.
	var pending int64
	if !t.IsZero() {
		pending = t.UnixMilli()
	}
	p.ticks = append(p.ticks, pending)
	return p
}

func (p rollPlan) args() []any {
	a := make([]any, 0, 4+len(p.ticks))
	a = append(a, p.name, p.ver, p.skipped, len(p.ticks))
	for _, t := range p.ticks {
		a = append(a, t)
	}
	return a
}
