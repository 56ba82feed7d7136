package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// NumSlots is the number of hash slots of a Redis cluster.
const NumSlots = 16384

const (
	clusterMasters  = 3
	clusterReplicas = 1
	// clusterWait bounds the waits of cluster operations whose context has no
	// deadline.
	clusterWait = 60 * time.Second
	// migrateBatch is small so that a slot holding a few hundred keys takes
	// several MIGRATE round trips, which gives concurrent clients a chance to
	// hit the ASK redirection rather than only MOVED.
	migrateBatch = 50
)

// ClusterConfig describes a cluster of three masters with one replica each.
type ClusterConfig struct {
	// Dir holds one sub-directory per node; a temporary one is created (and
	// removed by Stop) if empty.
	Dir string
	// NodeTimeout is --cluster-node-timeout; 0 means 2 s. It is how long a
	// silent master takes to be failed over automatically.
	NodeTimeout time.Duration
	// AppendOnly, AppendFsync and ExtraArgs apply to every node, as in Config.
	AppendOnly  bool
	AppendFsync string
	ExtraArgs   []string
	// Logf receives lifecycle messages (see Config.Logf).
	Logf func(format string, args ...any)
}

// Cluster is a running Redis cluster of six nodes.
type Cluster struct {
	cfg     ClusterConfig
	dir     string
	ownsDir bool
	nodes   []*Server // in start order; the first three became masters

	mu      sync.Mutex
	clients map[string]*redis.Client
	masters []string // last known, for MasterAddrs when no node answers
	stopped bool
}

// StartCluster starts six nodes, joins them with `redis-cli --cluster create
// --cluster-replicas 1` and waits until every node reports cluster_state:ok,
// all 16384 slots are covered, all nodes agree on who serves them and every
// replica is in sync with its master.
func StartCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	cli, err := lookCLI()
	if err != nil {
		return nil, err
	}
	if _, err := LookPath(); err != nil {
		return nil, err
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 2 * time.Second
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, clusterWait)
		defer cancel()
	}
	c := &Cluster{cfg: cfg, dir: cfg.Dir, clients: map[string]*redis.Client{}}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "rediscluster-"); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		c.ownsDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	n := clusterMasters * (1 + clusterReplicas)
	c.nodes = make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c.nodes[i], errs[i] = start(ctx, Config{
				Dir:         filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
				AppendOnly:  cfg.AppendOnly,
				AppendFsync: cfg.AppendFsync,
				ExtraArgs:   cfg.ExtraArgs,
				Logf:        nil, // six "started" lines would only be noise
			}, &clusterOpts{nodeTimeout: cfg.NodeTimeout})
		})
	}
	wg.Wait()
	c.nodes = slices.DeleteFunc(c.nodes, func(s *Server) bool { return s == nil })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(clusterReplicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("redisserver: redis-cli --cluster create: %w\n%s", err, lastLines(string(out), 30))
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	c.logf("redisserver: cluster up: masters %v, all nodes %v (dir %s)", c.MasterAddrs(), c.Addrs(), c.dir)
	return c, nil
}

// Addrs returns the addresses of all six nodes, in start order.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr()
	}
	return a
}

// MasterAddrs returns the current masters that serve slots, asking the
// cluster (they change with Failover); if no node answers it returns the
// last known list.
func (c *Cluster) MasterAddrs() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if !n.Running() || n.Suspended() {
			continue
		}
		v, err := c.slotView(ctx, n.Addr())
		if err != nil {
			continue
		}
		m := v.masters()
		c.mu.Lock()
		c.masters = m
		c.mu.Unlock()
		return m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.masters)
}

// Node returns the node listening on addr, or nil. Kill, Restart, Suspend
// and Resume on it simulate node failures; the node keeps its nodes.conf, so
// it rejoins the cluster after Restart.
func (c *Cluster) Node(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Nodes returns all six nodes.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Stop stops every node and removes the directory if StartCluster created
// it. It is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n != nil {
			wg.Go(func() { errs[i] = n.Stop() })
		}
	}
	wg.Wait()
	if c.ownsDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// client returns a plain client for admin commands on one node. Retries are
// off because admin commands such as CLUSTER FAILOVER or MIGRATE must not be
// sent twice behind our back.
func (c *Cluster) client(addr string) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[addr]; ok {
		return cl
	}
	cl := redis.NewClient(&redis.Options{
		Addr:            addr,
		MaxRetries:      -1,
		DialTimeout:     time.Second,
		ReadTimeout:     10 * time.Second, // MIGRATE of a batch
		PoolSize:        2,
		DisableIdentity: true, // CLIENT SETINFO is 7.2+
		Protocol:        2,
	})
	if c.clients == nil { // stopped: do not leak into a dead map
		return cl
	}
	c.clients[addr] = cl
	return cl
}

// WaitHealthy waits until every running node says cluster_state:ok with all
// slots assigned, all running nodes report the same CLUSTER SLOTS (which
// covers all slots and lists every running node), and every running replica
// has its replication link up. Nodes that are killed or suspended are
// ignored, so it can also be used after failing a node on purpose.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, clusterWait)
		defer cancel()
	}
	var last error
	for {
		if last = c.checkHealthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: cluster not healthy: %w (%v)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) checkHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var first slotView
	var firstAddr string
	for _, n := range c.nodes {
		if !n.Running() || n.Suspended() {
			continue
		}
		addr := n.Addr()
		cl := c.client(addr)
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", addr)
		}
		if !strings.Contains(info, "cluster_slots_assigned:16384") {
			return fmt.Errorf("%s: not all slots assigned", addr)
		}
		v, err := c.slotView(ctx, addr)
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", addr, err)
		}
		if !v.covered() {
			return fmt.Errorf("%s: CLUSTER SLOTS does not cover all slots: %v", addr, v)
		}
		if first == nil {
			first, firstAddr = v, addr
		} else if v.String() != first.String() {
			return fmt.Errorf("slot views differ: %s sees %v, %s sees %v", firstAddr, first, addr, v)
		}
		repl, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("%s: INFO replication: %w", addr, err)
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica link not up yet", addr)
		}
	}
	if first == nil {
		return errors.New("no node is running")
	}
	listed := map[string]bool{}
	for _, r := range first {
		listed[r.master] = true
		for _, a := range r.replicas {
			listed[a] = true
		}
	}
	for _, n := range c.nodes {
		if n.Running() && !n.Suspended() && !listed[n.Addr()] {
			return fmt.Errorf("%s is not part of the slot map yet: %v", n.Addr(), first)
		}
	}
	return nil
}

func (c *Cluster) nodeID(ctx context.Context, addr string) (string, error) {
	id, err := c.client(addr).Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("redisserver: CLUSTER MYID on %s: %w", addr, err)
	}
	return id, nil
}

func (c *Cluster) role(ctx context.Context, addr string) (string, error) {
	v, err := c.client(addr).Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	r, _ := v[0].(string)
	return r, nil
}

// Failover makes a replica of masterAddr take over with a manual (coordinated,
// lossless) CLUSTER FAILOVER and waits until the roles have switched and the
// cluster is healthy again. It returns the new master's address.
func (c *Cluster) Failover(ctx context.Context, masterAddr string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, clusterWait)
		defer cancel()
	}
	id, err := c.nodeID(ctx, masterAddr)
	if err != nil {
		return "", err
	}
	lines, err := c.client(masterAddr).Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
	if err != nil {
		return "", fmt.Errorf("redisserver: CLUSTER REPLICAS on %s: %w", masterAddr, err)
	}
	var replica string
	for _, l := range lines {
		// <id> <ip:port@cport> <flags> ...
		f := strings.Fields(l)
		if len(f) < 3 || strings.Contains(f[2], "fail") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		if n := c.Node(addr); n != nil && n.Running() && !n.Suspended() {
			replica = addr
			break
		}
	}
	if replica == "" {
		return "", fmt.Errorf("redisserver: failover of %s: no healthy replica", masterAddr)
	}
	c.logf("redisserver: failover of %s to its replica %s", masterAddr, replica)

	for {
		if err := c.client(replica).Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
			return "", fmt.Errorf("redisserver: CLUSTER FAILOVER on %s: %w", replica, err)
		}
		// A manual failover gives up after the node timeout if the master
		// and the replica cannot agree on the offset; then ask again.
		deadline := time.Now().Add(2*c.cfg.NodeTimeout + time.Second)
		for time.Now().Before(deadline) {
			r1, err1 := c.role(ctx, replica)
			r2, err2 := c.role(ctx, masterAddr)
			if err1 == nil && err2 == nil && r1 == "master" && r2 == "slave" {
				if err := c.WaitHealthy(ctx); err != nil {
					return "", err
				}
				return replica, nil
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("redisserver: failover of %s to %s: %w", masterAddr, replica, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// MoveSlot migrates one hash slot and its keys to toMasterAddr, the way
// `redis-cli --cluster reshard` does: SETSLOT IMPORTING on the target,
// SETSLOT MIGRATING on the source, MIGRATE the keys in batches, then SETSLOT
// NODE on the target, the source and the other masters. While it runs,
// clients get ASK for keys already moved and MOVED afterwards. It returns
// once every node agrees on the new owner.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, toMasterAddr string) error {
	if slot < 0 || slot >= NumSlots {
		return fmt.Errorf("redisserver: MoveSlot: slot %d out of range", slot)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, clusterWait)
		defer cancel()
	}
	view, err := c.slotView(ctx, toMasterAddr)
	if err != nil {
		return fmt.Errorf("redisserver: MoveSlot: %w", err)
	}
	if !slices.Contains(view.masters(), toMasterAddr) {
		return fmt.Errorf("redisserver: MoveSlot: %s is not a master serving slots", toMasterAddr)
	}
	from := view.owner(slot)
	if from == "" {
		return fmt.Errorf("redisserver: MoveSlot: slot %d has no owner", slot)
	}
	if from == toMasterAddr {
		return nil
	}
	fromID, err := c.nodeID(ctx, from)
	if err != nil {
		return err
	}
	toID, err := c.nodeID(ctx, toMasterAddr)
	if err != nil {
		return err
	}
	src, dst := c.client(from), c.client(toMasterAddr)
	c.logf("redisserver: moving slot %d from %s to %s", slot, from, toMasterAddr)

	// Importing first: a client sent to the target by ASK must find it ready.
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return fmt.Errorf("redisserver: SETSLOT IMPORTING on %s: %w", toMasterAddr, err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		return fmt.Errorf("redisserver: SETSLOT MIGRATING on %s: %w", from, err)
	}
	host, port, _ := net.SplitHostPort(toMasterAddr)
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
		if err != nil {
			return fmt.Errorf("redisserver: GETKEYSINSLOT on %s: %w", from, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 10000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("redisserver: MIGRATE from %s: %w", from, err)
		}
		moved += len(keys)
	}
	// Target first so it owns the slot before the source starts sending
	// MOVED to it; then the source, then everybody else to skip waiting for
	// gossip.
	order := []string{toMasterAddr, from}
	for _, m := range view.masters() {
		if m != toMasterAddr && m != from {
			order = append(order, m)
		}
	}
	for _, m := range order {
		if err := c.client(m).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err(); err != nil {
			return fmt.Errorf("redisserver: SETSLOT NODE on %s: %w", m, err)
		}
	}
	for {
		err := c.checkHealthy(ctx)
		if err == nil {
			var v slotView
			if v, err = c.slotView(ctx, from); err == nil && v.owner(slot) != toMasterAddr {
				err = fmt.Errorf("slot %d still served by %s", slot, v.owner(slot))
			}
		}
		if err == nil {
			c.logf("redisserver: slot %d moved with %d keys", slot, moved)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: MoveSlot %d: %w (%v)", slot, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SlotOwner returns the master that currently serves slot.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (string, error) {
	for _, n := range c.nodes {
		if !n.Running() || n.Suspended() {
			continue
		}
		v, err := c.slotView(ctx, n.Addr())
		if err != nil {
			continue
		}
		if o := v.owner(slot); o != "" {
			return o, nil
		}
	}
	return "", fmt.Errorf("redisserver: no node knows the owner of slot %d", slot)
}

func (c *Cluster) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}
