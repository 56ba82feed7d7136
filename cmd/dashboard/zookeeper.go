package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/zkcoord"
	"github.com/rmq-go/rmq/topic"
)

// ZooKeeperOption configures WithZooKeeper.
type ZooKeeperOption func(*zkConfig)

type zkConfig struct {
	servers []string
	root    string
}

// WithZooKeeper adds the page of slot ownership in ZooKeeper mode: the
// workers of the fleet coordinated through these servers ("host:port"),
// and for every topic which worker owns which slot and the slot's owner
// epoch. Pass the servers and root the workers pass to rmq.WithZooKeeper.
//
// The page connects to ZooKeeper when it is asked for and closes the
// connection before it answers, so the dashboard still owns no goroutine
// and needs no Close; a connection costs a few milliseconds.
func WithZooKeeper(servers []string, opts ...ZooKeeperOption) Option {
	return func(c *config) {
		z := &zkConfig{servers: append([]string(nil), servers...)}
		for _, o := range opts {
			o(z)
		}
		c.zk = z
	}
}

// ZKRoot sets the znode the fleet coordinates under, as rmq.ZKRoot (default
// "/rmq/<key prefix>").
func ZKRoot(path string) ZooKeeperOption { return func(z *zkConfig) { z.root = path } }

// zkTimeout bounds one page's whole conversation with ZooKeeper: a
// go-zookeeper request waits for a connection indefinitely otherwise.
const zkTimeout = 5 * time.Second

// initZooKeeper checks the option and sets the default root.
func (h *handler) initZooKeeper() error {
	z := h.cfg.zk
	if z == nil {
		return nil
	}
	if len(z.servers) == 0 {
		return errors.New("dashboard: WithZooKeeper without servers")
	}
	if z.root == "" {
		z.root = "/rmq/" + h.cfg.keyPrefix
	}
	root, err := zkcoord.CleanRoot(z.root)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	z.root = root
	return nil
}

type zkSlotRow struct {
	Slot  int
	Owner string // "" when nobody owns it
	Epoch int64  // the slot's owner epoch in Redis; 0 when never owned
}

type zkTopicRow struct {
	Topic topic.Topic
	// Coordinated is false when no worker ever coordinated the topic in
	// this fleet.
	Coordinated bool
	Owned       int
	Slots       []zkSlotRow
	Err         string
}

type zkData struct {
	Servers string
	Root    string
	Members []zkcoord.Member
	Topics  []zkTopicRow
}

func (h *handler) zookeeperPage(w http.ResponseWriter, r *http.Request) {
	if h.initErr != nil {
		h.failErr(w, r, h.initErr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), zkTimeout)
	defer cancel()
	ts, err := h.insp.Topics(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := zkData{Servers: strings.Join(h.cfg.zk.servers, ", "), Root: h.cfg.zk.root}
	err = h.withZooKeeper(ctx, func(conn *zk.Conn) error {
		var err error
		if d.Members, err = zkcoord.ReadMembers(conn, d.Root); err != nil {
			return err
		}
		for _, t := range ts {
			row := zkTopicRow{Topic: t}
			owners, ok, err := zkcoord.ReadOwners(conn, d.Root, t.Name(), t.SlotAmount())
			if err != nil {
				return err
			}
			row.Coordinated = ok
			if ok {
				row.Slots = make([]zkSlotRow, len(owners))
				for s, o := range owners {
					row.Slots[s] = zkSlotRow{Slot: s, Owner: o}
					if o != "" {
						row.Owned++
					}
				}
			}
			d.Topics = append(d.Topics, row)
		}
		return nil
	})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	for j := range d.Topics {
		if err := h.readEpochs(ctx, &d.Topics[j]); err != nil {
			d.Topics[j].Err = err.Error()
		}
	}
	h.render(w, r, http.StatusOK, "zookeeper", "ZooKeeper", d)
}

// withZooKeeper opens a connection for the length of f. When ctx ends the
// connection is closed, which fails f's pending requests; it returns only
// after go-zookeeper's goroutines ended.
func (h *handler) withZooKeeper(ctx context.Context, f func(*zk.Conn) error) error {
	conn, events, err := zk.Connect(h.cfg.zk.servers, zkTimeout,
		zk.WithLogger(zkLogger{h.log}), zk.WithLogInfo(false))
	if err != nil {
		return fmt.Errorf("dashboard: connect to ZooKeeper: %w", err)
	}
	stop := context.AfterFunc(ctx, conn.Close)
	err = f(conn)
	stop()
	conn.Close()
	for range events { // closed when the connection's goroutines end
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("dashboard: ZooKeeper %s did not answer within %v", strings.Join(h.cfg.zk.servers, ","), zkTimeout)
	}
	return err
}

// readEpochs fills the owner epochs of a topic's slots with one pipeline of
// GETs: the epoch keys lie in different hash slots, so a cluster client
// splits it by node.
func (h *handler) readEpochs(ctx context.Context, row *zkTopicRow) error {
	if len(row.Slots) == 0 {
		return nil
	}
	pipe := h.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(row.Slots))
	for s := range row.Slots {
		cmds[s] = pipe.Get(ctx, keyspace.EpochKey(h.cfg.keyPrefix, row.Topic.Name(), s))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for s, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue // never owned
		}
		if err != nil {
			return err
		}
		if row.Slots[s].Epoch, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("epoch of slot %d: %w", s, err)
		}
	}
	return nil
}

// zkLogger sends go-zookeeper's log lines (connection failures) to the
// dashboard's logger at debug level: the page shows the error that counts.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug("dashboard: zk: " + fmt.Sprintf(format, args...))
}
