package zkcoord

import (
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rmq-go/rmq/consumer"
)

// slotOp is one operation the loop starts for slot s of t, in the
// registration (gen, session sid, member) that was current when it started.
// It runs on its own goroutine, at most one per slot at a time, and records
// its result under Coordinator.mu, unless the registration changed meanwhile.
type slotOp func(t *zkTopic, s int, gen uint64, sid int64, member string)

// claim creates the owner node (and its holder index entry) of a slot.
func (z *Coordinator) claim(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	acl := zk.WorldACL(zk.PermAll)
	_, err := z.sess.conn.Multi(
		&zk.CreateRequest{Path: z.paths.owner(name, s), Data: []byte(member), Acl: acl, Flags: zk.FlagEphemeral},
		&zk.CreateRequest{Path: z.paths.holder(name, s, member), Acl: acl, Flags: zk.FlagEphemeral},
	)
	held, epoch, known := false, int64(0), true
	switch {
	case errors.Is(err, zk.ErrNodeExists):
	case err != nil && !isUnknownOutcome(err):
		z.log.Warn("rmq: claim slot", "topic", name, "slot", s, "err", err)
	default:
		held, epoch, known = z.ownerOf(t, s, sid, member)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		return
	}
	switch {
	case !known:
		sl.unsure = true
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
	case held:
		sl.held, sl.epoch, sl.fails = true, epoch, 0
		t.owners[s] = member
	default:
		// Taken: wait for the holders listing to show it free again.
		if t.owners[s] == "" {
			t.owners[s] = "?"
		}
		t.holders.signal()
	}
}

// ownerOf checks whether the owner node of slot s belongs to session sid
// and returns its creation zxid. known is false when ZooKeeper could not be
// asked. An owner node that belongs to this connection's newer session (a
// claim sent just before an expiry went out in the new session) is deleted.
func (z *Coordinator) ownerOf(t *zkTopic, s int, sid int64, member string) (held bool, epoch int64, known bool) {
	name := t.t.Name()
	conn := z.sess.conn
	exists, stat, err := conn.Exists(z.paths.owner(name, s))
	if err != nil {
		return false, 0, false
	}
	if !exists {
		return false, 0, true
	}
	if stat.EphemeralOwner == sid {
		return true, stat.Czxid, true
	}
	if stat.EphemeralOwner == conn.SessionID() {
		_, _ = conn.Multi(
			&zk.DeleteRequest{Path: z.paths.holder(name, s, member), Version: -1},
			&zk.DeleteRequest{Path: z.paths.owner(name, s), Version: stat.Version},
		)
	}
	return false, 0, true
}

// check resolves a slot whose claim or release had an unknown outcome.
func (z *Coordinator) check(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	exists, _, err := z.sess.conn.Exists(z.paths.holder(name, s, member))
	held, epoch, known := false, int64(0), err == nil
	if err == nil && exists {
		held, epoch, known = z.ownerOf(t, s, sid, member)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		return
	}
	if !known {
		sl.unsure = true
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		return
	}
	sl.unsure = false
	sl.held, sl.epoch = held, epoch
	if held {
		t.owners[s] = member
	} else if t.owners[s] == member {
		t.owners[s] = ""
		t.holders.signal()
	}
}

// activate starts a term of a held slot in the handler.
func (z *Coordinator) activate(t *zkTopic, s int, gen uint64, _ int64, _ string) {
	z.mu.Lock()
	epoch := t.slots[s].epoch
	z.mu.Unlock()
	err := t.h.Acquire(z.opCtx, s, epoch)
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy = false
	if gen != z.gen {
		if err == nil {
			t.h.Revoke([]int{s}, consumer.ErrOwnershipLost)
		}
		return
	}
	if err != nil {
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		if z.opCtx.Err() == nil {
			z.log.Error("rmq: could not start owning a slot", "topic", t.t.Name(), "slot", s, "epoch", epoch, "err", err)
		}
		return
	}
	sl.active, sl.revoked, sl.fails = true, false, 0
	z.log.Debug("rmq: slot owned", "topic", t.t.Name(), "slot", s, "epoch", epoch)
}

// release drains a slot in the handler, then deletes its owner node.
func (z *Coordinator) release(t *zkTopic, s int, gen uint64, sid int64, member string) {
	name := t.t.Name()
	conn := z.sess.conn
	err := t.h.Release(z.opCtx, s)
	if err == nil && conn.SessionID() == sid {
		_, err = conn.Multi(
			&zk.DeleteRequest{Path: z.paths.holder(name, s, member), Version: -1},
			&zk.DeleteRequest{Path: z.paths.owner(name, s), Version: -1},
		)
		if errors.Is(err, zk.ErrNoNode) {
			err = nil // gone already
		}
	} else if err == nil {
		err = zk.ErrSessionExpired
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	sl := &t.slots[s]
	sl.busy, sl.releasing, sl.revoked = false, false, false
	if gen != z.gen {
		return
	}
	if err != nil {
		if isUnknownOutcome(err) {
			sl.unsure = true
		}
		sl.fails++
		sl.retryAt = time.Now().Add(backoff(sl.fails))
		return
	}
	sl.held, sl.fails = false, 0
	if t.owners[s] == member {
		t.owners[s] = ""
	}
	z.log.Debug("rmq: slot released", "topic", name, "slot", s)
}

// backoff is the wait after fails failures of one operation.
func backoff(fails int) time.Duration {
	return min(50*time.Millisecond<<min(fails, 10), 5*time.Second)
}
