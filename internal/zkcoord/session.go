package zkcoord

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// session is the connection to ZooKeeper: go-zookeeper's *zk.Conn, which
// keeps one session alive across reconnections, and the session timeout the
// server granted.
type session struct {
	conn    *zk.Conn
	asked   time.Duration
	granted atomic.Int64  // ms, learnt from go-zookeeper's log (logger.go); 0: unknown
	done    chan struct{} // go-zookeeper's goroutines ended
	// state is the last session state an event reported; guarded by
	// Coordinator.mu.
	state zk.State
}

// timeout is the smaller of the session timeout asked for and the one the
// server granted.
func (s *session) timeout() time.Duration {
	d := s.asked
	if g := time.Duration(s.granted.Load()) * time.Millisecond; g > 0 && g < d {
		d = g
	}
	return d
}

// connect opens the connection; events go to onEvent, synchronously from
// go-zookeeper's goroutines.
func (s *session) connect(cfg Config, log zk.Logger, onEvent func(zk.Event)) error {
	opts := []func(*zk.Conn){zk.WithLogger(log), zk.WithEventCallback(onEvent)}
	if cfg.Dialer != nil {
		opts = append(opts, zk.WithDialer(cfg.Dialer))
	}
	// zk.Connect's option type is not exported, but a func literal is
	// assignable to it.
	conn, events, err := zk.Connect(cfg.Servers, cfg.SessionTimeout, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
	if err != nil {
		close(s.done)
		return fmt.Errorf("rmq: connect to ZooKeeper: %w", err)
	}
	s.conn = conn
	go func() {
		for range events { // drained so go-zookeeper never blocks; the callback acts
		}
		close(s.done)
	}()
	return nil
}

// wait returns once go-zookeeper's goroutines ended (after conn.Close), or
// an error after d.
func (s *session) wait(d time.Duration) error {
	select {
	case <-s.done:
		return nil
	case <-time.After(d):
		return errors.New("rmq: ZooKeeper connection did not shut down")
	}
}

// onEvent receives every go-zookeeper event: it only records and pokes the
// loop.
func (z *Coordinator) onEvent(ev zk.Event) {
	z.mu.Lock()
	switch ev.Type {
	case zk.EventSession:
		z.sess.state = ev.State
		if ev.State == zk.StateHasSession {
			// Watches may have fired while disconnected: read again.
			z.staleAllLocked()
		}
	case zk.EventNodeChildrenChanged:
		for _, t := range z.topics {
			switch ev.Path {
			case z.paths.topicMembers(t.t.Name()):
				t.members.signal()
			case z.paths.holders(t.t.Name()):
				t.holders.signal()
			}
		}
	case zk.EventNotWatching:
		z.staleAllLocked()
	}
	z.mu.Unlock()
	z.poke()
}

func (z *Coordinator) staleAllLocked() {
	for _, t := range z.topics {
		t.members.signal()
		t.holders.signal()
	}
}

// isUnknownOutcome reports whether a ZooKeeper write may or may not have
// been applied (the connection broke before the reply).
func isUnknownOutcome(err error) bool {
	switch {
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion),
		errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrInvalidPath),
		errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrInvalidACL):
		return false
	}
	return true
}
