package lease

import (
	"context"
	"time"
)

// The sweep of one engine: roll back deliveries whose lease ran out (their
// consumer died or lost Redis). Every consumer of a topic sweeps; the
// scripts make concurrent sweeps harmless. The client's one sweeper
// (hub.go) decides when; this file does one engine's sweep and says
// when its next is due.

// sweepRecheck is how soon an engine is looked at again when a sweep left
// leases that look expired (sweep.lua rolls back at most SweepLimit a slot
// per call).
const sweepRecheck = 10 * time.Millisecond

// SweepLimit is the most leases one sweep.lua call rolls back.
const SweepLimit = 1000

// sweepHeads sweeps st's engine on the slots whose earliest lease ran out
// by heads (read with Redis's clock offset, nil: the engine's estimate),
// and returns when to look at the engine next: at the earliest lease's
// expiry but no later than a sweepInterval from now; zero when every
// prepare set is empty (the engine is idle for sweeping).
func sweepHeads(ctx context.Context, l *Hub, st *state, heads []head, offset *time.Duration) time.Time {
	redisNow := func() time.Time {
		if offset != nil {
			return time.Now().Add(*offset)
		}
		return st.p.Clock.Now()
	}
	// A lease is expired when its deadline second is before Redis's
	// (sweep.lua); the estimate is a lower bound of Redis's clock, so what
	// looks expired here is expired there.
	nowSec := redisNow().Unix()
	var cands []int
	for _, h := range heads {
		if !h.empty && h.deadline < nowSec {
			cands = append(cands, h.slot)
		}
	}
	swept := 0
	if len(cands) > 0 {
		if !l.useForSweep(st) {
			return time.Time{} // the engine stopped sweeping
		}
		var err error
		swept, err = st.c.SweepSlots(cands)
		st.sweepUse.Done()
		if err != nil {
			return time.Now().Add(st.p.SweepInterval)
		}
		// The swept slots' earliest leases are new: read them again.
		fresh, err := readEngineHeads(ctx, st, cands)
		if err != nil {
			return time.Now().Add(st.p.SweepInterval)
		}
		at := map[int]head{}
		for _, h := range fresh {
			at[h.slot] = h
		}
		for i := range heads {
			if h, ok := at[heads[i].slot]; ok {
				heads[i] = h
			}
		}
	}
	earliest := int64(-1)
	for _, h := range heads {
		if !h.empty && (earliest < 0 || h.deadline < earliest) {
			earliest = h.deadline
		}
	}
	now := time.Now()
	if earliest < 0 {
		return time.Time{}
	}
	if earliest < redisNow().Unix() {
		if swept >= SweepLimit {
			// More expired than one call took.
			return now.Add(sweepRecheck)
		}
		// Expired, but not swept (a slot this engine may not sweep now):
		// as the old ticker did.
		return now.Add(st.p.SweepInterval)
	}
	// The lease runs out when Redis's clock reaches the next second.
	expiry := time.Unix(earliest+1, 0)
	var local time.Time
	if offset != nil {
		local = expiry.Add(-*offset)
	} else {
		local = now.Add(st.p.Clock.UntilMs(expiry.UnixMilli()))
	}
	next := local.Add(sweepMargin)
	if limit := now.Add(st.p.SweepInterval); limit.Before(next) {
		next = limit
	}
	if soonest := now.Add(sweepRecheck); next.Before(soonest) {
		next = soonest
	}
	return next
}
