package zkcoord

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/topic"
)

// registration is this worker's membership of the fleet: its member nodes
// in one session. Guarded by Coordinator.mu.
type registration struct {
	session int64  // the session the member is registered in; 0: none
	member  string // the member id in session
	running bool   // a register call is under way
	fails   int
	retry   time.Time // no register call before
	failed  error     // permanent (a topic conflict): never retried

	once     sync.Once
	joined   chan struct{} // closed at the first registration
	startErr chan error    // a permanent error, for Start
}

func newRegistration() registration {
	return registration{joined: make(chan struct{}), startErr: make(chan error, 1)}
}

// register creates the persistent layout, checks the topic definitions and
// creates this session's member nodes under a fresh member id.
func (z *Coordinator) register() {
	defer z.poke()
	start := time.Now()
	id := uuid.NewString()
	conn := z.sess.conn
	err := z.ensureLayout()
	var sid int64
	if err == nil {
		acl := zk.WorldACL(zk.PermAll)
		ops := []any{&zk.CreateRequest{Path: z.paths.member(id), Data: z.memberInfo(), Acl: acl, Flags: zk.FlagEphemeral}}
		for _, t := range z.topics {
			ops = append(ops, &zk.CreateRequest{Path: z.paths.topicMember(t.t.Name(), id), Acl: acl, Flags: zk.FlagEphemeral})
		}
		_, err = conn.Multi(ops...)
		if err == nil || isUnknownOutcome(err) {
			exists, stat, e := conn.Exists(z.paths.member(id))
			switch {
			case e != nil:
				err = e
			case exists:
				sid, err = stat.EphemeralOwner, nil
			case err == nil:
				err = errors.New("member node vanished")
			}
		}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	r := &z.reg
	r.running = false
	switch {
	case err != nil && errors.Is(err, topic.ErrConflict):
		r.failed = err
		z.log.Error("rmq: cannot join the fleet", "err", err)
		select {
		case r.startErr <- err:
		default:
		}
	case err == nil && sid != 0 && sid == conn.SessionID():
		r.session, r.member, r.fails = sid, id, 0
		z.lease.setLocked(start.Add(z.leaseLength()))
		for _, t := range z.topics {
			t.members = zkListing{stale: true}
			t.holders = zkListing{stale: true}
			t.target = nil
		}
		z.log.Info("rmq: registered with ZooKeeper", "member", id, "session", fmt.Sprintf("%#x", sid))
		r.once.Do(func() { close(r.joined) })
	default:
		r.fails++
		r.retry = time.Now().Add(backoff(r.fails))
		if z.phase == lifecycle.Started {
			z.log.Warn("rmq: register with ZooKeeper", "err", err, "retry_in", time.Until(r.retry))
		}
	}
}

func (z *Coordinator) memberInfo() []byte {
	host, _ := os.Hostname()
	names := make([]string, len(z.topics))
	for i, t := range z.topics {
		names[i] = t.t.Name()
	}
	b, _ := json.Marshal(map[string]any{"host": host, "pid": os.Getpid(), "topics": names, "since": time.Now().UTC()})
	return b
}

// ensureLayout creates the persistent nodes and stores or checks the topic
// definitions.
func (z *Coordinator) ensureLayout() error {
	conn := z.sess.conn
	acl := zk.WorldACL(zk.PermAll)
	create := func(p string, data []byte) error {
		_, err := conn.Create(p, data, 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("rmq: create %s: %w", p, err)
		}
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(z.paths.root, "/"), "/")
	for i := range parts {
		if err := create("/"+strings.Join(parts[:i+1], "/"), nil); err != nil {
			return err
		}
	}
	for _, p := range []string{z.paths.members(), z.paths.topics()} {
		if err := create(p, nil); err != nil {
			return err
		}
	}
	for _, t := range z.topics {
		name, def := t.t.Name(), t.t.Definition()
		if err := create(z.paths.topic(name), []byte(def)); err != nil {
			return err
		}
		stored, _, err := conn.Get(z.paths.topic(name))
		if err != nil {
			return fmt.Errorf("rmq: read topic %s from ZooKeeper: %w", name, err)
		}
		if string(stored) != def {
			return fmt.Errorf("%w: %s is registered in ZooKeeper as %s, defined here as %s", topic.ErrConflict, name, stored, def)
		}
		for _, p := range []string{z.paths.topicMembers(name), z.paths.owners(name), z.paths.holders(name)} {
			if err := create(p, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
