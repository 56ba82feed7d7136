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
	c.markFlowSlots(m.Slot)
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

// flowScan is the state of an engine's flow scans: the slots to scan
// (marked by evidence of flow work there) and a cursor per slot.
type flowScan struct {
	mu      sync.Mutex
	gen     uint64
	marked  map[int]uint64 // slot -> the generation of its latest mark
	cursors map[int]string
}

// markFlowSlots makes the flow scans look at slots: a "T" wake-up (nodes
// staged or made live there), a flow child delivered or ended there.
func (c *Engine) markFlowSlots(slots ...int) {
	c.fscan.mu.Lock()
	defer c.fscan.mu.Unlock()
	if c.fscan.marked == nil {
		c.fscan.marked = map[int]uint64{}
	}
	c.fscan.gen++
	for _, s := range slots {
		c.fscan.marked[s] = c.fscan.gen
	}
}

// flowScanEvery is how often an engine scans its marked slots for flow
// work nobody finished (runFlowScans): twice its sweep interval, within
// bounds.
func (c *Engine) flowScanEvery() time.Duration {
	return min(max(2*c.cfg.sweepInterval, 200*time.Millisecond), 30*time.Second)
}

// runFlowScans is the engine's flow scan loop. It starts with the slots
// whose watch list or staging set is not empty (one pipelined EXISTS, at
// start only), then, every flowScanEvery, scans the marked slots
// (scanFlows); a slot whose scan round ends with both empty is unmarked.
// An engine whose topic carries no flows sends nothing to Redis here
// after its start: its slots are marked only by a "T" wake-up or a flow
// child's delivery.
func (c *Engine) runFlowScans(ctx context.Context) {
	n := c.topic.SlotAmount()
	if busy, err := c.flowBusy(ctx, seq(n)); err == nil {
		c.markFlowSlots(busy...)
	}
	t := time.NewTicker(c.flowScanEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.fscan.mu.Lock()
		var slots []int
		for s := range c.fscan.marked {
			slots = append(slots, s)
		}
		c.fscan.mu.Unlock()
		if len(slots) > 0 {
			c.scanFlows(ctx, slots)
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// flowBusy returns those of slots whose watch list or staging set is not
// empty.
func (c *Engine) flowBusy(ctx context.Context, slots []int) ([]int, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(slots))
	for i, s := range slots {
		tk := keyspace.TreeKeysFor(c.cfg.prefix, c.topic.Name(), s)
		cmds[i] = pipe.Exists(ctx, tk.Up, tk.StageQ)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var busy []int
	for i, cmd := range cmds {
		if cmd.Val() > 0 {
			busy = append(busy, slots[i])
		}
	}
	return busy, nil
}

// scanFlows runs one flow scan step on each of slotList: outcomes nobody
// reported, and flows a dead SendFlow left staged. A slot whose round
// ended (cursor 0) with nothing left to watch is unmarked.
func (c *Engine) scanFlows(ctx context.Context, slotList []int) {
	var done []int
	for _, s := range slotList {
		c.fscan.mu.Lock()
		cur := c.fscan.cursors[s]
		c.fscan.mu.Unlock()
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
		c.fscan.mu.Lock()
		if c.fscan.cursors == nil {
			c.fscan.cursors = map[int]string{}
		}
		c.fscan.cursors[s] = next
		c.fscan.mu.Unlock()
		if next == "0" {
			done = append(done, s)
		}
	}
	if len(done) == 0 {
		return
	}
	// A mark made after this read (a "T" wake-up racing it) stays.
	c.fscan.mu.Lock()
	gen := c.fscan.gen
	c.fscan.mu.Unlock()
	busy, err := c.flowBusy(ctx, done)
	if err != nil {
		return
	}
	still := map[int]bool{}
	for _, s := range busy {
		still[s] = true
	}
	c.fscan.mu.Lock()
	for _, s := range done {
		if !still[s] && c.fscan.marked[s] <= gen {
			delete(c.fscan.marked, s)
		}
	}
	c.fscan.mu.Unlock()
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
