package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
)

// Flow control (docs/flow-control.md): an engine's part. The limits a
// topic runs with are the ones stored with it (slots.LimitsKey); the
// consumer's options only store them when none are (resolve). The scripts
// enforce them: fetch.lua gets them as its flow descriptor (fetchFlow),
// and the ends of deliveries (ack, rollback, sweep) get the slot's group
// keys so a group's place frees and a waiting group or topic is woken. On
// a cluster the topic-wide ones are the permits' (flow/permits.go). A topic
// whose messages carry groups (a producer marked it, or the consumer
// limits groups) is fetched group by group in turn.

// flowState is what an engine knows of its topic's flow control.
type flowState struct {
	// opts are the limits the consumer's options ask for.
	opts options.Limits
	// limits are the ones in force (stored, else opts): read on every
	// fetch and delivery end, so an atomic rather than a lock.
	limits atomic.Pointer[options.Limits]
	// grouped: the topic's messages carry groups (slots.GroupedKey, or a
	// 'G' wake-up).
	grouped atomic.Bool
	// reread: the stored limits changed ('L' wake-up, or a resubscription):
	// the next fetch reads them first.
	reread atomic.Bool
	// single: one node, whose scripts may name the topic's keys next to a
	// slot's (topic-wide limits in fetch.lua); else permits.
	single bool
	gkeys  []slots.GroupKeys
	fkeys  slots.FlowKeys
	// prepares: every slot's prepare set (a topic concurrency counts them).
	prepares []string
	permits  *flow.Permits // a cluster's topic-wide limits; nil on one node
}

func newFlowState(c *Engine, opts options.Limits) *flowState {
	_, single := c.rdb.(*redis.Client)
	f := &flowState{opts: opts, single: single, fkeys: slots.FlowKeysFor(c.cfg.prefix, c.topic)}
	f.set(opts)
	f.gkeys = make([]slots.GroupKeys, c.topic.SlotAmount())
	f.prepares = make([]string, c.topic.SlotAmount())
	for i := range f.gkeys {
		f.gkeys[i] = slots.GroupKeysFor(c.cfg.prefix, c.topic, i)
		f.prepares[i] = c.keys[i].Prepare
	}
	if !single {
		f.permits = flow.NewPermits(flow.PermitEnv{
			RDB:            c.rdb,
			Log:            c.log,
			WakeCmd:        c.wakeCmd,
			Wake:           c.keys[0].Wake,
			PrepareTimeout: c.cfg.prepareTimeout,
			FlowKeys:       f.fkeys,
			Prepares:       f.prepares,
			Limits:         f.current,
		})
	}
	return f
}

// current returns the limits in force.
func (f *flowState) current() options.Limits { return *f.limits.Load() }

func (f *flowState) set(l options.Limits) { f.limits.Store(&l) }

// active reports whether the topic is under flow control: the ends of its
// deliveries name the flow keys.
func (f *flowState) active() bool {
	return f.grouped.Load() || !f.current().IsZero()
}

// fetchFlow is the flow of the engine's next fetch.lua call (nil: none).
// topic: the call may name the topic's keys (a single node).
func (f *flowState) fetchFlow() *scripts.Flow {
	l := f.current()
	grouped := f.grouped.Load() || l.Groups()
	if !grouped && l.IsZero() {
		return nil
	}
	fl := &scripts.Flow{Grouped: grouped, GroupPlaces: l.GroupConcurrency}
	fl.GroupRateIv, fl.GroupTol = options.GCRA(l.GroupRate, l.GroupRatePer)
	if f.single {
		fl.TopicRateIv, fl.TopicTol = options.GCRA(l.Rate, l.RatePer)
		fl.TopicConcurrency = l.Concurrency
		fl.TopicFlow, fl.Prepares = f.fkeys.Flow, f.prepares
	}
	if !grouped && fl.TopicRateIv == 0 && fl.TopicConcurrency == 0 {
		return nil // a cluster's topic-wide limits are the permits'
	}
	return fl
}

// endFlow reports which of its flow keys the end of a delivery (ack,
// rollback, sweep) must name, the others being the slot's store key again
// (none): the group keys with group places (a group's place frees, a group
// at its limit comes back), the topic's tflow on a single node with a
// topic concurrency (fetchers found at the limit are woken). Other limits
// need nothing at a delivery's end.
func (f *flowState) endFlow() (places, tflow bool) {
	l := f.current()
	return l.GroupConcurrency > 0, f.single && l.Concurrency > 0
}

// endFlowKeys are the four keys ack.lua, rollback.lua and sweep.lua take
// after a slot's own under flow control: gq, gocc, gturn and tflow, each
// the store key again when not needed; ok false when none is.
func (c *Engine) endFlowKeys(slot int) (keys [4]string, ok bool) {
	places, tflow := c.flow.endFlow()
	store := c.keys[slot].Store
	keys = [4]string{store, store, store, store}
	if places {
		g := c.flow.gkeys[slot]
		keys[0], keys[1], keys[2] = g.Queue, g.Places, g.Turn
	}
	if tflow {
		keys[3] = c.flow.fkeys.Flow
	}
	return keys, places || tflow
}

// ended tells a cluster's permits that a push delivery ended
// (flow/permits.go).
func (f *flowState) ended(m *consumer.Message) {
	if f.permits != nil {
		f.permits.Ended(m)
	}
}

// endedPulled tells a cluster's permits that a pulled delivery of this
// engine ended (flow/permits.go): its place goes back at once.
func (f *flowState) endedPulled(ctx context.Context, m *consumer.Message) {
	if f.permits != nil {
		f.permits.EndPulled(ctx, m)
	}
}

// endedByID tells a cluster's permits that whatever delivery of id in
// slot was current ended by id (flow/permits.go).
func (f *flowState) endedByID(ctx context.Context, slot int, id string) {
	if f.permits != nil {
		f.permits.EndByID(ctx, slot, id)
	}
}

// endKeys are the keys rollback.lua and sweep.lua take after a slot's
// seven under flow control (nil: none).
func (c *Engine) endKeys(slot int) []string {
	keys, ok := c.endFlowKeys(slot)
	if !ok {
		return nil
	}
	return keys[:]
}

// readLimits reads the topic's stored limits and the grouped mark and
// resolves them with the options (resolve); it runs at Start's first
// fetch and after an 'L' wake-up or a resubscription.
func (c *Engine) readLimits(ctx context.Context) error {
	pipe := c.rdb.Pipeline()
	lim := pipe.HGet(ctx, slots.LimitsKey(c.cfg.prefix), c.topic.Name())
	grp := pipe.HGet(ctx, slots.GroupedKey(c.cfg.prefix), c.topic.Name())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("rmq: read the limits of %s: %w", c.topic.Name(), err)
	}
	return c.applyStored(ctx, lim, grp)
}

// applyStored takes the stored limits (lim) and grouped mark (grp).
func (c *Engine) applyStored(ctx context.Context, lim, grp *redis.StringCmd) error {
	if grp.Err() == nil {
		c.flow.grouped.Store(true)
	}
	stored, found := "", lim.Err() == nil
	if found {
		stored = lim.Val()
	}
	return c.resolve(ctx, stored, found)
}

// resolve decides the limits in force: the stored ones win. When none are
// stored and the options ask for some, they are stored (HSETNX: of
// consumers starting together, the first wins, and the others obey it);
// options that differ from the stored limits are logged.
func (c *Engine) resolve(ctx context.Context, stored string, found bool) error {
	f := c.flow
	if !found && !f.opts.IsZero() {
		ok, err := c.rdb.HSetNX(ctx, slots.LimitsKey(c.cfg.prefix), c.topic.Name(), f.opts.String()).Result()
		if err != nil {
			return fmt.Errorf("rmq: store the limits of %s: %w", c.topic.Name(), err)
		}
		if ok {
			f.set(f.opts)
			c.log.InfoContext(ctx, "rmq: stored the topic's limits", "limits", f.opts.String())
			return nil
		}
		stored, err = c.rdb.HGet(ctx, slots.LimitsKey(c.cfg.prefix), c.topic.Name()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("rmq: read the limits of %s: %w", c.topic.Name(), err)
		}
		found = err == nil
	}
	var l options.Limits
	if found {
		var err error
		if l, err = options.ParseLimits(stored); err != nil {
			c.log.ErrorContext(ctx, "rmq: stored limits unreadable; keeping the ones in force", "err", err)
			return nil
		}
	}
	if old := f.current(); old != l {
		f.set(l)
		if old != f.opts || !found {
			c.log.InfoContext(ctx, "rmq: the topic's limits changed", "limits", l.String())
		}
	}
	if !f.opts.IsZero() && f.opts != l {
		c.log.WarnContext(ctx, "rmq: the consumer's limit options differ from the topic's stored limits; the stored ones apply (rmq.Inspector.SetLimits changes them)",
			"options", f.opts.String(), "stored", l.String())
	}
	return nil
}

// ensureLimits reads the stored limits again when a wake-up said they
// changed. A failed read keeps the ones in force and tries again next
// time.
func (c *Engine) ensureLimits(ctx context.Context) {
	if !c.flow.reread.Swap(false) {
		return
	}
	if err := c.readLimits(ctx); err != nil {
		c.flow.reread.Store(true)
		c.log.WarnContext(ctx, "rmq: read the topic's limits", "err", err)
	}
}

// noteFlow folds a fetch's word on the topic's limits into the fetcher.
func (f *fetcher) noteFlow(r fetchResult) {
	switch {
	case r.topicWait > 0:
		f.flowUntil, f.flowBlocked = r.topicWait, false
	case r.topicWait < 0:
		f.flowBlocked, f.flowRecheck = true, r.topicRecheck
	default:
		f.flowUntil, f.flowBlocked = 0, false
	}
}

// flowWait reports whether a topic limit holds fetching back now; with a
// rate it lowers *wait to the time it allows the next start. (Reading the
// clock only when a rate wait is known keeps the common path as it was.)
func (f *fetcher) flowWait(wait *time.Duration) bool {
	if f.flowBlocked {
		if f.flowRecheck <= 0 {
			return true
		}
		// A cluster's places: also when the first lease runs out (a
		// killed client's places free then, and nobody says so).
		f.c.syncClock()
		d := f.c.clock.UntilMs(f.flowRecheck)
		if d <= 0 {
			f.flowBlocked, f.flowRecheck = false, 0
			return false
		}
		*wait = min(*wait, d)
		return true
	}
	if f.flowUntil == 0 {
		return false
	}
	c := f.c
	c.syncClock()
	d := c.clock.UntilMs(f.flowUntil)
	if d <= 0 {
		f.flowUntil = 0
		return false
	}
	*wait = min(*wait, d)
	return true
}

// flowHousekeeping gives a cluster's permits back for deliveries that
// ended, and renews the lease of the places held when due.
func (f *fetcher) flowHousekeeping(ctx context.Context) {
	pm := f.c.flow.permits
	if pm == nil {
		return
	}
	give, renew := pm.Pending()
	if give || (!renew.IsZero() && !time.Now().Before(renew)) {
		pm.Flush(ctx)
	}
}

// permitWait bounds a fetcher's sleep by the renewal of its permits'
// lease.
func (f *fetcher) permitWait(wait time.Duration) time.Duration {
	pm := f.c.flow.permits
	if pm == nil {
		return wait
	}
	if _, renew := pm.Pending(); !renew.IsZero() {
		wait = min(wait, max(time.Until(renew), time.Millisecond))
	}
	return wait
}

// Limits returns the limits the engine has in force (the stored ones).
func (c *Engine) Limits() options.Limits { return c.flow.current() }
