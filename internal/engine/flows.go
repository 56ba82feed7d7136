package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
)

// A flow child's final outcome reaches its parent's record
// (internal/flowtree) before the child's own delivery ends: a completed
// child's report goes before its ack (reportCompleted), so a crash between
// the two re-runs the child and its second report counts for nothing.
// An outcome the scripts decide (dead in a rollback or a sweep, expired)
// is reported right after the call that decided it (checkFlowChildren);
// the watch entry each child keeps in its slot until its report went
// through lets a scan (scanFlows, with the sweep) report whatever a
// crash left unreported.

// treeObserver is the optional extension of rmq.Observer that hears of
// flow parents released and failed.
type treeObserver interface {
	FlowParent(topic string, failed bool)
}

// newReporter returns the engine's flow reporter.
func (c *Engine) newReporter() *flowtree.Reporter {
	r := flowtree.NewReporter(c.rdb, c.cfg.prefix)
	if o, ok := c.cfg.observer.(treeObserver); ok {
		r.Observe = o.FlowParent
	}
	return r
}

// reportCompleted reports m's completion to its parent when m is a flow
// child; an error means the ack must not go (the outcome is not
// recorded yet: the delivery's lease runs out and it runs again).
func (c *Engine) reportCompleted(m *consumer.Message) error {
	ref, ok := flowtree.RefOf(m.Headers)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.prepareTimeout)
	defer cancel()
	return c.tree.Report(ctx, ref, 'c', "", m.Result())
}

// forgetChild clears m's watch entry after its ack went through.
func (c *Engine) forgetChild(m *consumer.Message) {
	if _, ok := flowtree.RefOf(m.Headers); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.prepareTimeout)
	defer cancel()
	if err := c.tree.Forget(ctx, c.topic.Name(), m.Slot, m.ID); err != nil {
		c.log.WarnContext(ctx, "rmq: clear a flow child's watch entry (a scan clears it)", "id", m.ID, "err", err)
	}
}

// checkFlowChildren reports the outcomes of ids of slot that a script
// just ended (dead, expired) if they are flow children.
func (c *Engine) checkFlowChildren(slot int, ids ...string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.prepareTimeout)
	defer cancel()
	if err := c.tree.Check(ctx, c.topic.Name(), slot, ids...); err != nil {
		c.log.WarnContext(ctx, "rmq: report flow children's outcomes (a scan reports them)", "slot", slot, "err", err)
	}
}

// flowScan is the state of an engine's flow scans: a cursor per slot.
type flowScan struct {
	mu      sync.Mutex
	cursors map[int]string
}

// flowScanEvery is how often an engine scans its topic's slots for flow
// work nobody finished (runFlowScans): twice its sweep interval, within
// bounds.
func (c *Engine) flowScanEvery() time.Duration {
	return min(max(2*c.cfg.sweepInterval, 200*time.Millisecond), 30*time.Second)
}

// runFlowScans is the engine's flow scan loop: every flowScanEvery, the
// slots with watched children or staged nodes (one pipelined EXISTS of
// each slot's two keys finds them; a topic without flows costs nothing
// more) get a scan step each (scanFlows).
func (c *Engine) runFlowScans(ctx context.Context) {
	t := time.NewTicker(c.flowScanEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := c.topic.SlotAmount()
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, n)
		for s := range n {
			tk := keyspace.TreeKeysFor(c.cfg.prefix, c.topic.Name(), s)
			cmds[s] = pipe.Exists(ctx, tk.Up, tk.StageQ)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			continue
		}
		var busy []int
		for s, cmd := range cmds {
			if cmd.Val() > 0 {
				busy = append(busy, s)
			}
		}
		if len(busy) > 0 {
			c.scanFlows(ctx, busy)
		}
	}
}

// scanFlows runs one flow scan step on each of slotList: outcomes nobody
// reported, and flows a dead SendFlow left staged.
func (c *Engine) scanFlows(ctx context.Context, slotList []int) {
	c.fscan.mu.Lock()
	defer c.fscan.mu.Unlock()
	if c.fscan.cursors == nil {
		c.fscan.cursors = map[int]string{}
	}
	for _, s := range slotList {
		cur := c.fscan.cursors[s]
		if cur == "" {
			cur = "0"
		}
		next, err := c.tree.Scan(ctx, c.topic.Name(), s, cur)
		if err != nil {
			if ctx.Err() == nil {
				c.log.WarnContext(ctx, "rmq: flow scan failed", "slot", s, "err", err)
			}
			return
		}
		c.fscan.cursors[s] = next
	}
}

// readChildren implements consumer.Message.Children for the handlers.
func (c *Engine) readChildren(ctx context.Context, topicName string, slot int, id string) ([]options.Child, error) {
	rec, err := flowtree.Read(ctx, c.rdb, c.cfg.prefix, topicName, slot, id)
	if errors.Is(err, flowtree.ErrNoRecord) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fin := rec.Finished()
	out := make([]options.Child, len(fin))
	for i, ch := range fin {
		out[i] = options.Child{Topic: ch.Topic, ID: ch.ID, State: ch.State, Result: ch.Result, Error: ch.Error}
	}
	return out, nil
}

// errFlowReport is the error of a flow child whose completion could not
// be reported (reportCompleted).
var errFlowReport = errors.New("rmq: the flow child's completion could not be reported to its parent")
