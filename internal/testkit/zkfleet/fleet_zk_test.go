//go:build linux

package zkfleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fleet tests run one after the other (no t.Parallel): each runs three
// or four worker processes, a ZooKeeper JVM and a producer, which is all a
// small CI machine can take at once.

const (
	slotAmount = 64
	drainWait  = 3 * time.Minute
)

func fleetCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func shareOK(n int, workers int) bool {
	return n == slotAmount/workers || n == (slotAmount+workers-1)/workers
}

// Three worker processes, 64 slots, 20,000 messages over 500 keys: every
// key's messages are handled in sequence order, one at a time, each exactly
// once, and the slots are shared evenly.
func TestFleetPerKeyOrder(t *testing.T) {
	f := newFleet(t, slotAmount, 500, 40)
	for _, n := range []string{"a", "b", "c"} {
		f.start(n)
	}
	begin := time.Now()
	f.waitDrained(f.produce(fleetCtx(t)), drainWait)
	took := time.Since(begin)
	f.stopAll()
	r := f.records()
	rep := f.check(r)
	assert.Equal(t, 20000, rep.handlings, "each message handled exactly once")
	assert.Zero(t, rep.repeats)
	assert.Zero(t, rep.overlaps)
	for w, n := range r.lastOwned() {
		assert.True(t, shareOK(n, 3), "worker %s owned %d of %d slots", w, n, slotAmount)
	}
	t.Logf("20000 messages over 500 keys through 3 workers in %v (%.0f msg/s); shares %v", took.Round(time.Millisecond),
		float64(rep.handlings)/took.Seconds(), r.lastOwned())
}

// kill -9 of one worker mid-run: its slots move to the others after the
// session timeout, its interrupted messages are handled again (the only
// repeats), nothing is lost and per-key order holds.
func TestFleetKillWorker(t *testing.T) {
	f := newFleet(t, slotAmount, 300, 30)
	f.base.WorkMin, f.base.WorkMax = 2*time.Millisecond, 8*time.Millisecond
	a, b, c := f.start("a"), f.start("b"), f.start("c")
	f.waitBalanced(3)
	sending := f.produce(fleetCtx(t))
	f.waitProgress(0.2, drainWait)
	b.waitBusy(5, drainWait)
	b.kill9()
	f.waitDrained(sending, drainWait)
	f.stopAll()
	r := f.records()
	rep := f.check(r)
	interrupted, firstAfter := 0, time.Duration(0)
	for _, h := range r.hs {
		if h.interrup && h.end == 0 {
			interrupted++
		}
		if h.worker != b.name && h.start > b.killedAt.UnixNano() && h.epoch > 0 {
			// first handling of one of b's slots by its new owner
			for _, g := range r.hs {
				if g.worker == b.name && g.slot == h.slot {
					if d := time.Duration(h.start - b.killedAt.UnixNano()); firstAfter == 0 || d < firstAfter {
						firstAfter = d
					}
					break
				}
			}
		}
	}
	assert.LessOrEqual(t, rep.repeats, interrupted+slotAmount/3+1, "only interrupted messages repeat")
	last := r.lastOwned()
	assert.Equal(t, slotAmount/2, last[a.name])
	assert.Equal(t, slotAmount/2, last[c.name])
	t.Logf("kill -9: %d handlings, %d cut off mid-handler, %d handled again; b's slots handled by others %v after the kill (session timeout %v)",
		rep.handlings, interrupted, rep.repeats, firstAfter.Round(time.Millisecond), sessionTimeout)
}

// A worker that joins mid-run takes a fair share, and no slot is ever
// handled by two workers at once (check verifies the per-slot handover).
func TestFleetJoinWorker(t *testing.T) {
	f := newFleet(t, slotAmount, 300, 30)
	f.base.WorkMin, f.base.WorkMax = 2*time.Millisecond, 8*time.Millisecond // a backlog to hand over
	f.start("a")
	f.start("b")
	c := f.prepare("c")
	sending := f.produce(fleetCtx(t))
	f.waitProgress(0.3, drainWait)
	joined := time.Now()
	c.join()
	f.waitDrained(sending, drainWait)
	// Let the fleet settle if the run ended before the handover did.
	require.Eventually(t, func() bool {
		return shareOK(f.records().lastOwned()[c.name], 3)
	}, 30*time.Second, 100*time.Millisecond, "the joiner did not get a fair share")
	f.stopAll()
	r := f.records()
	rep := f.check(r)
	assert.Zero(t, rep.repeats)
	assert.Zero(t, rep.overlaps)
	for w, n := range r.lastOwned() {
		assert.True(t, shareOK(n, 3), "worker %s owned %d slots", w, n)
	}
	var settled time.Duration
	for _, o := range r.owned[c.name] {
		if shareOK(o.n, 3) {
			settled = time.Duration(o.at - joined.UnixNano())
			break
		}
	}
	byC := 0
	for _, h := range r.hs {
		if h.worker == c.name {
			byC++
		}
	}
	assert.Positive(t, byC, "c handled messages after joining")
	assert.Equal(t, 2, rep.maxEpochs, "slots were handed over under load")
	t.Logf("join: c owned its share (%d slots) %v after it was told to join and handled %d of %d messages; "+
		"up to %d owner epochs per slot; no slot handled by two workers at once",
		r.lastOwned()[c.name], settled.Round(time.Millisecond), byC, rep.handlings, rep.maxEpochs)
}

// SIGSTOP of a worker for longer than its session timeout, then SIGCONT:
// its slots are taken over meanwhile; once it runs again Redis refuses every
// write it tries under its old epochs, it cancels its handlers' contexts and
// starts nothing under them. The only handlings that overlap the new
// owners' are the ones frozen mid-handler.
func TestFleetFrozenWorker(t *testing.T) {
	f := newFleet(t, slotAmount, 300, 30)
	// Slower handlers build a backlog, so b is busy on most of its slots
	// when it freezes.
	f.base.WorkMin, f.base.WorkMax = 5*time.Millisecond, 15*time.Millisecond
	f.start("a")
	b := f.start("b")
	f.start("c")
	f.waitBalanced(3)
	sending := f.produce(fleetCtx(t))
	f.waitProgress(0.2, drainWait)
	b.waitBusy(5, drainWait)
	b.freeze(2*sessionTimeout + time.Second)
	f.waitDrained(sending, drainWait)
	// Snapshots b wrote in its first moments after SIGCONT may still show
	// the slots it owned before (its coordinator had not run yet).
	require.Eventually(t, func() bool {
		return shareOK(f.records().ownedSince(b.name, b.resumed.Add(sessionTimeout)), 3)
	}, 30*time.Second, 100*time.Millisecond, "b did not rejoin with a fair share")
	f.stopAll()
	r := f.records()
	rep := f.check(r)

	resumed := b.resumed.UnixNano()
	frozen, cancelled := 0, 0
	for _, h := range r.hs {
		if h.worker != b.name || !h.interrup || h.end < resumed {
			continue
		}
		frozen++ // frozen mid-handler: it ended after SIGCONT
		if h.cause != "-" {
			cancelled++
		}
	}
	// Every write the frozen worker attempted under its old epochs after it
	// resumed was refused: the acks of its frozen handlers ended fenced (or
	// were not even tried), none was accepted.
	accepted := 0
	for _, h := range r.hs {
		if h.worker != b.name || !h.interrup || h.end < resumed {
			continue
		}
		ok := false
		for _, o := range r.byID[h.id] {
			if o.worker == b.name && o.at >= resumed && (o.outcome == "fenced" || o.outcome == "revoked") {
				ok = true
			}
		}
		if !ok {
			accepted++
			t.Errorf("frozen handling of %s (slot %d, epoch %d) ended with an accepted ack after SIGCONT", h.id, h.slot, h.epoch)
		}
	}
	assert.Zero(t, accepted)
	assert.Positive(t, frozen, "b was busy when it froze")
	assert.Positive(t, cancelled, "the frozen handlers saw their contexts cancelled on waking")
	// On waking, b cancels the contexts of its handlers: a frozen handler
	// whose work was already over by then (its timer expired during the
	// freeze) may finish first, but none keeps running after the first
	// cancellation. Those ends wait for the scheduler, which after SIGCONT
	// has every goroutine of b to run at once: under -race on two shared
	// cores one ended 9.9 ms after the first cancellation, so the bound is
	// 30 ms (a handler works at most 15 ms).
	var firstCancel int64
	for _, h := range r.hs {
		if h.worker == b.name && h.end >= resumed && h.cause != "-" && (firstCancel == 0 || h.end < firstCancel) {
			firstCancel = h.end
		}
	}
	for _, h := range r.hs {
		if h.worker == b.name && h.interrup && h.end >= resumed && h.cause == "-" && firstCancel != 0 {
			assert.LessOrEqual(t, h.end, firstCancel+int64(30*time.Millisecond), "%s ran on uncancelled after b revoked its slots", h.id)
		}
	}
	assert.LessOrEqual(t, rep.overlaps, frozen, "only frozen handlings overlap the new owners'")
	last := r.lastOwned()
	assert.True(t, shareOK(last[b.name], 3), "b rejoined and got its share back: %v", last)
	t.Logf("SIGSTOP %v (session timeout %v): %d handlings frozen mid-handler (%d saw their context cancelled on waking); "+
		"%d of b's Redis calls refused after SIGCONT (fenced outcomes %d, revoked %d); %d handlings overlapped the new owners'; "+
		"%d handled again; %d frozen at their very start",
		b.resumed.Sub(b.stopped).Round(time.Millisecond), sessionTimeout, frozen, cancelled,
		rep.refusedAfter, r.outcomes[b.name+"/fenced"], r.outcomes[b.name+"/revoked"], rep.overlaps, rep.repeats, r.frozenAtStart)
}

// ZooKeeper stopped and restarted mid-run: the workers pause (and stop
// their handlers once their session can no longer be proven), resume when
// it is back, and nothing is lost, duplicated or handled by two owners.
func TestFleetZooKeeperRestart(t *testing.T) {
	f := newFleet(t, slotAmount, 300, 30)
	for _, n := range []string{"a", "b", "c"} {
		f.start(n)
	}
	sending := f.produce(fleetCtx(t))
	f.waitProgress(0.3, drainWait)
	down := time.Now()
	require.NoError(t, f.zk.Shutdown())
	// From here on the server is gone and the workers' connections broke.
	p0, err := f.pending()
	require.NoError(t, err)
	sent0 := f.sent.Load()
	time.Sleep(sessionTimeout) // the outage lasts a session timeout: the behaviour under test
	p1, err := f.pending()
	require.NoError(t, err)
	sent := f.sent.Load()
	// The workers paused on the disconnect: what they consumed meanwhile is
	// at most what was in flight (one delivery per slot).
	consumedWhileDown := (sent - p1) - (sent0 - p0)
	assert.LessOrEqual(t, consumedWhileDown, int64(2*slotAmount), "the workers kept consuming while ZooKeeper was down")
	require.NoError(t, f.zk.Restart(fleetCtx(t)))
	downFor := time.Since(down)
	f.waitDrained(sending, drainWait)
	f.stopAll()
	r := f.records()
	rep := f.check(r)
	assert.Zero(t, rep.overlaps)
	assert.Zero(t, rep.repeats)
	t.Logf("ZooKeeper down %v: %d consumed while down, pending %d -> %d (%d sent by then); %d handlings, up to %d epochs per slot; outcomes %v",
		downFor.Round(time.Millisecond), max(consumedWhileDown, 0), p0, p1, sent, rep.handlings, rep.maxEpochs, r.outcomes)
}
