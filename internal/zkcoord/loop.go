package zkcoord

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/topic"
)

// zkTopic is the coordinator's view of one topic; guarded by Coordinator.mu.
type zkTopic struct {
	t topic.Topic
	h engine.SlotHandler

	members zkListing
	holders zkListing
	owners  []string // owner member per slot, from holders ("?" unknown)
	target  []string // Assign result; nil until both listings were read
	slots   []zkSlot
}

// zkListing is a watched children list.
type zkListing struct {
	names []string
	seen  bool // read at least once in the current registration
	stale bool // a change was signalled since the last read
	busy  bool
	seq   uint64 // change signals, to detect one during a read
	retry time.Time
	fails int
}

func (l *zkListing) signal() {
	l.stale = true
	l.seq++
}

// zkSlot is the coordinator's state of one slot of a topic.
type zkSlot struct {
	held      bool // we hold the owner node in the registered session
	unsure    bool // a claim or release had an unknown outcome: check
	active    bool // the handler owns the slot (between Acquire and Release/Revoke)
	releasing bool
	revoked   bool // Revoke already told the handler (while releasing)
	busy      bool // an operation runs
	epoch     int64
	retryAt   time.Time
	fails     int
}

// loop is the decision loop: it runs step whenever an event, an ending
// operation or a deadline calls for it.
type loop struct {
	z *Coordinator
}

func newLoop(z *Coordinator) *loop { return &loop{z: z} }

func (l *loop) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := l.z.step()
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-l.z.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// step makes every decision the current state calls for and returns how
// soon to look again at the latest.
func (z *Coordinator) step() time.Duration {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := time.Now()
	next := time.Hour
	wake := func(at time.Time) {
		if d := at.Sub(now); d < next {
			next = max(d, time.Millisecond)
		}
	}
	if z.phase != lifecycle.Started {
		return next
	}
	connected := z.sess.state == zk.StateHasSession
	sid := z.sess.conn.SessionID()
	r := &z.reg
	if r.session != 0 && connected && sid != r.session {
		z.loseSessionLocked()
	}
	if r.session == 0 && connected && !r.running && !z.leaving && r.failed == nil {
		if now.Before(r.retry) {
			wake(r.retry)
		} else {
			r.running = true
			z.actors.Go("zk register", func(context.Context) { z.register() })
		}
	}
	registered := r.session != 0 && connected && sid == r.session
	leaseOK := r.session != 0 && now.Before(z.lease.until)
	if leaseOK {
		wake(z.lease.until)
	} else {
		z.revokeAllLocked(consumer.ErrOwnershipLost)
	}
	if pause := !(registered && leaseOK); pause != z.paused {
		z.paused = pause
		for _, t := range z.topics {
			t.h.Pause(pause)
		}
		if pause {
			z.pauseWarned = true
			z.log.Warn("rmq: ZooKeeper session not confirmed: fetching paused", "connected", connected, "lease_valid", leaseOK)
		} else if z.pauseWarned {
			z.pauseWarned = false
			z.log.Info("rmq: ZooKeeper session confirmed: fetching resumed")
		}
	}
	if !registered {
		return next
	}
	for _, t := range z.topics {
		z.reconcileLocked(t, now, leaseOK && !z.leaving, wake)
	}
	return next
}

// loseSessionLocked forgets everything owned in a session that is gone: its
// ephemeral nodes were deleted when it expired.
func (z *Coordinator) loseSessionLocked() {
	z.log.Warn("rmq: ZooKeeper session expired: every slot is given up", "member", z.reg.member)
	z.revokeAllLocked(consumer.ErrOwnershipLost)
	z.gen++
	z.reg.session, z.reg.member = 0, ""
	z.lease.dropLocked()
	for _, t := range z.topics {
		for s := range t.slots {
			busy := t.slots[s].busy
			t.slots[s] = zkSlot{busy: busy}
		}
		t.members = zkListing{stale: true}
		t.holders = zkListing{stale: true}
		t.target = nil
	}
}

// revokeAllLocked tells the handlers to stop every slot still running.
func (z *Coordinator) revokeAllLocked(cause error) {
	for _, t := range z.topics {
		var list []int
		for s := range t.slots {
			sl := &t.slots[s]
			if sl.active || (sl.releasing && !sl.revoked) {
				list = append(list, s)
				sl.active = false
				sl.revoked = true
			}
		}
		if len(list) > 0 {
			t.h.Revoke(list, cause)
			z.log.Warn("rmq: slots revoked", "topic", t.t.Name(), "count", len(list), "cause", cause)
		}
	}
}

// reconcileLocked refreshes a topic's listings and moves each slot one step
// towards its target.
func (z *Coordinator) reconcileLocked(t *zkTopic, now time.Time, mayAct bool, wake func(time.Time)) {
	name := t.t.Name()
	for _, l := range []*zkListing{&t.members, &t.holders} {
		if (l.stale || !l.seen) && !l.busy {
			if now.Before(l.retry) {
				wake(l.retry)
				continue
			}
			l.busy, l.stale = true, false
			gen, seq := z.gen, l.seq
			z.actors.Go("zk listing", func(context.Context) { z.refresh(t, l, gen, seq) })
		}
	}
	if !t.members.seen || !t.holders.seen || !mayAct {
		return
	}
	if t.target == nil {
		t.target = Assign(name, t.t.SlotAmount(), t.members.names, t.owners)
	}
	member := z.reg.member
	for s := range t.slots {
		sl := &t.slots[s]
		if sl.busy {
			continue
		}
		if now.Before(sl.retryAt) {
			wake(sl.retryAt)
			continue
		}
		want := t.target[s] == member
		var op slotOp
		switch {
		case sl.unsure || (!sl.held && t.owners[s] == member):
			op = z.check
		case want && !sl.held && t.owners[s] == "":
			op = z.claim
		case want && sl.held && !sl.active:
			op = z.activate
		case !want && sl.held:
			op = z.release
		}
		if op != nil {
			if z.slotOps >= maxSlotOps {
				return // an ending operation pokes the loop
			}
			if !want && sl.held && !sl.unsure {
				sl.active, sl.releasing, sl.revoked = false, true, false
			}
			sl.busy = true
			z.slotOps++
			gen, sid := z.gen, z.reg.session
			z.actors.Go("zk slot", func(context.Context) {
				op(t, s, gen, sid, member)
				z.mu.Lock()
				z.slotOps--
				z.mu.Unlock()
				z.poke()
			})
		}
	}
}

// refresh reads a watched children list.
func (z *Coordinator) refresh(t *zkTopic, l *zkListing, gen, seq uint64) {
	defer z.poke()
	dir := z.paths.topicMembers(t.t.Name())
	if l == &t.holders {
		dir = z.paths.holders(t.t.Name())
	}
	names, _, _, err := z.sess.conn.ChildrenW(dir)
	z.mu.Lock()
	defer z.mu.Unlock()
	if gen != z.gen {
		return // loseSessionLocked reset the listing
	}
	l.busy = false
	if err != nil {
		l.stale = true
		l.fails++
		l.retry = time.Now().Add(backoff(l.fails))
		if z.phase == lifecycle.Started {
			z.log.Debug("rmq: read ZooKeeper children", "path", dir, "err", err)
		}
		return
	}
	l.fails = 0
	l.names, l.seen = names, true
	if l.seq != seq {
		l.stale = true // changed during the read: read again
	}
	if l == &t.holders {
		owners := make([]string, t.t.SlotAmount())
		for _, n := range names {
			if s, m, ok := parseHolder(n); ok && s < len(owners) {
				owners[s] = m
			}
		}
		t.owners = owners
	}
	t.target = nil // recomputed from the new view
}
