package rmq

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/zkcoord"
	"github.com/rmq-go/rmq/topic"
)

// ZooKeeperOption configures WithZooKeeper.
type ZooKeeperOption func(*zkOptions)

type zkOptions struct {
	servers        []string
	sessionTimeout time.Duration
	root           string
	// dialer opens the TCP connections to ZooKeeper (nil: net.DialTimeout);
	// tests set it through export_test.go to cut the network.
	dialer func(network, address string, timeout time.Duration) (net.Conn, error)
}

// WithZooKeeper makes the client's consumers take part in a fleet
// coordinated through the ZooKeeper servers ("host:port"): every slot of a
// topic has exactly one owner in the fleet at a time, which handles the
// slot's messages one after another in score order (so messages that share
// a slot basis are handled serially and in order), and slots move when
// workers join, leave or die.
//
// Ownership is fenced: a worker claims a slot by creating its ephemeral
// owner node, gives it up only after its in-flight messages were acked or
// rolled back, pauses fetching when its ZooKeeper connection drops and stops
// its handlers before its session can expire. A worker frozen past its
// session (GC pause, SIGSTOP) is fenced by the slot's owner epoch in Redis:
// every fetch, ack, rollback, lease extension and sweep names it, and Redis
// refuses them once a newer owner took the slot. Message.Epoch carries the
// epoch to handlers as a fencing token for the systems they write to.
//
// Without WithZooKeeper every client consumes every slot (competing
// consumers). Do not mix the two modes on one key prefix.
func WithZooKeeper(servers []string, opts ...ZooKeeperOption) Option {
	return clientOption(func(c *config) {
		z := &zkOptions{servers: append([]string(nil), servers...)}
		for _, o := range opts {
			o(z)
		}
		c.zk = z
	})
}

// ZKSessionTimeout sets the ZooKeeper session timeout asked for (default
// 10s; the server grants one between 2 and 20 of its ticks). A worker that
// dies is replaced after about this long; a shorter one also makes a
// worker give up its slots sooner when its connection is slow.
func ZKSessionTimeout(d time.Duration) ZooKeeperOption {
	return func(z *zkOptions) { z.sessionTimeout = d }
}

// ZKRoot sets the znode under which the fleet coordinates (default
// "/rmq/<prefix>"). Workers sharing a key prefix must share the root.
func ZKRoot(path string) ZooKeeperOption { return func(z *zkOptions) { z.root = path } }

// initZooKeeper builds the coordinator when WithZooKeeper was given.
func (c *Client) initZooKeeper() error {
	z := c.cfg.zk
	if z == nil {
		return nil
	}
	root := z.root
	if root == "" {
		root = "/rmq/" + c.cfg.prefix
	}
	cfg := zkcoord.Config{Servers: z.servers, SessionTimeout: z.sessionTimeout, Root: root, Logger: c.log}
	if z.dialer != nil {
		cfg.Dialer = z.dialer
	}
	coord, err := zkcoord.New(cfg)
	if err != nil {
		// One sentinel for the caller (zkcoord's own is internal), and the
		// "rmq: " prefix once.
		return fmt.Errorf("%w: %s", ErrInvalidOption, strings.TrimPrefix(err.Error(), "rmq: "))
	}
	c.coord = coord
	return nil
}

// zkCoordinator is the coordinator the engines take their slots from: nil
// (an untyped nil, not a nil *zkcoord.Coordinator) without WithZooKeeper.
func (c *Client) zkCoordinator() engine.Coordinator {
	if c.coord == nil {
		return nil
	}
	return c.coord
}

// zkAddTopic hands a registered topic's engine to the coordinator.
func (c *Client) zkAddTopic(t topic.Topic, cons *engine.Engine) error {
	if c.coord == nil {
		return nil
	}
	return c.coord.AddTopic(t, cons.Slots())
}

// startZooKeeper joins the fleet once the consumers run (they own nothing
// until the coordinator acquires slots for them).
func (c *Client) startZooKeeper(ctx context.Context) error {
	if c.coord == nil {
		return nil
	}
	return c.coord.Start(ctx)
}

// leaveZooKeeper runs before the consumers close: no slot is taken any more
// and the other workers start claiming this one's slots (they get each one
// when Close ends the session, after the consumers drained).
func (c *Client) leaveZooKeeper(ctx context.Context) {
	if c.coord == nil {
		return
	}
	if err := c.coord.Leave(ctx); err != nil {
		c.log.WarnContext(ctx, "rmq: leave the ZooKeeper fleet", "err", err)
	}
}

// closeZooKeeper ends the session after the consumers closed.
func (c *Client) closeZooKeeper() error {
	if c.coord == nil {
		return nil
	}
	return c.coord.Close()
}

// OwnedSlots returns the slots of a topic this client consumes now with
// their owner epochs (ZooKeeper mode), or nil without WithZooKeeper.
func (c *Client) OwnedSlots(topicName string) map[int]int64 {
	if c.coord == nil {
		return nil
	}
	return c.coord.Owned(topicName)
}

// FleetMember returns this client's member id in the ZooKeeper fleet ("" if
// not registered, or without WithZooKeeper).
func (c *Client) FleetMember() string {
	if c.coord == nil {
		return ""
	}
	return c.coord.Member()
}
