package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Flow control (docs/flow-control.md): an engine's part. The limits a
// topic runs with are the ones stored with it (keyspace.LimitsKey); the
// consumer's options only store them when none are (resolve). The scripts
// enforce them: fetch.lua gets them as its flow descriptor (FetchFlow),
// and the ends of deliveries (ack, rollback, sweep) get the slot's group
// keys so a group's place frees and a waiting group or topic is woken. On
// a cluster the topic-wide ones are the permits' (permits.go). A topic
// whose messages carry groups (a producer marked it, or the consumer
// limits groups) is fetched group by group in turn.

// State is what an engine knows of its topic's flow control.
type State struct {
	env StateEnv
	// opts are the limits the consumer's options ask for.
	opts options.Limits
	// limits are the ones in force (stored, else opts): read on every
	// fetch and delivery end, so an atomic rather than a lock.
	limits atomic.Pointer[options.Limits]
	// grouped: the topic's messages carry groups (keyspace.GroupedKey, or a
	// 'G' wake-up).
	grouped atomic.Bool
	// reread: the stored limits changed ('L' wake-up, or a resubscription):
	// the next fetch reads them first.
	reread atomic.Bool
	// single: one node, whose scripts may name the topic's keys next to a
	// slot's (topic-wide limits in fetch.lua); else permits.
	single bool
	gkeys  []keyspace.GroupKeys
	fkeys  keyspace.FlowKeys
	// prepares: every slot's prepare set (a topic concurrency counts them).
	prepares []string
	permits  *Permits // a cluster's topic-wide limits; nil on one node
}

// StateEnv is the engine's part of a State: fixed for its life.
type StateEnv struct {
	RDB            redis.UniversalClient
	Prefix         string
	Topic          topic.Topic
	Keys           []keyspace.Keys // the topic's keys, by slot
	Log            *slog.Logger
	WakeCmd        string
	PrepareTimeout time.Duration
}

// NewState returns the flow control of env's topic, under the limits opts
// until the stored ones are read.
func NewState(env StateEnv, opts options.Limits) *State {
	_, single := env.RDB.(*redis.Client)
	f := &State{env: env, opts: opts, single: single, fkeys: keyspace.FlowKeysFor(env.Prefix, env.Topic)}
	f.set(opts)
	f.gkeys = make([]keyspace.GroupKeys, env.Topic.SlotAmount())
	f.prepares = make([]string, env.Topic.SlotAmount())
	for i := range f.gkeys {
		f.gkeys[i] = keyspace.GroupKeysFor(env.Prefix, env.Topic, i)
		f.prepares[i] = env.Keys[i].Prepare
	}
	if !single {
		f.permits = NewPermits(PermitEnv{
			RDB:            env.RDB,
			Log:            env.Log,
			WakeCmd:        env.WakeCmd,
			Wake:           env.Keys[0].Wake,
			PrepareTimeout: env.PrepareTimeout,
			FlowKeys:       f.fkeys,
			Prepares:       f.prepares,
			Limits:         f.Current,
		})
	}
	return f
}

// Current returns the limits in force.
func (f *State) Current() options.Limits { return *f.limits.Load() }

func (f *State) set(l options.Limits) { f.limits.Store(&l) }

// Permits are a cluster's topic-wide limits (permits.go); nil on one node.
func (f *State) Permits() *Permits { return f.permits }

// GroupKeys are slot's group keys.
func (f *State) GroupKeys(slot int) keyspace.GroupKeys { return f.gkeys[slot] }

// MarkReread makes the next fetch read the stored limits ('L' wake-up).
func (f *State) MarkReread() { f.reread.Store(true) }

// MarkGrouped records that the topic's messages carry groups ('G'
// wake-up).
func (f *State) MarkGrouped() { f.grouped.Store(true) }

// Active reports whether the topic is under flow control: the ends of its
// deliveries name the flow keys.
func (f *State) Active() bool {
	return f.grouped.Load() || !f.Current().IsZero()
}

// FetchFlow is the flow of the engine's next fetch.lua call (nil: none).
// The topic's keys are named only on a single node.
func (f *State) FetchFlow() *scripts.Flow {
	l := f.Current()
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
func (f *State) endFlow() (places, tflow bool) {
	l := f.Current()
	return l.GroupConcurrency > 0, f.single && l.Concurrency > 0
}

// EndFlowKeys are the four keys ack.lua, rollback.lua and sweep.lua take
// after a slot's own under flow control: gq, gocc, gturn and tflow, each
// the store key again when not needed; ok false when none is.
func (f *State) EndFlowKeys(slot int) (keys [4]string, ok bool) {
	places, tflow := f.endFlow()
	store := f.env.Keys[slot].Store
	keys = [4]string{store, store, store, store}
	if places {
		g := f.gkeys[slot]
		keys[0], keys[1], keys[2] = g.Queue, g.Places, g.Turn
	}
	if tflow {
		keys[3] = f.fkeys.Flow
	}
	return keys, places || tflow
}

// EndKeys are the keys rollback.lua and sweep.lua take after a slot's
// seven under flow control (nil: none).
func (f *State) EndKeys(slot int) []string {
	keys, ok := f.EndFlowKeys(slot)
	if !ok {
		return nil
	}
	return keys[:]
}

// Ended tells a cluster's permits that a push delivery ended
// (permits.go).
func (f *State) Ended(m *consumer.Message) {
	if f.permits != nil {
		f.permits.Ended(m)
	}
}

// EndedPulled tells a cluster's permits that a pulled delivery of this
// engine ended (permits.go): its place goes back at once.
func (f *State) EndedPulled(ctx context.Context, m *consumer.Message) {
	if f.permits != nil {
		f.permits.EndPulled(ctx, m)
	}
}

// EndedByID tells a cluster's permits that whatever delivery of id in
// slot was current ended by id (permits.go).
func (f *State) EndedByID(ctx context.Context, slot int, id string) {
	if f.permits != nil {
		f.permits.EndByID(ctx, slot, id)
	}
}

// ReadLimits reads the topic's stored limits and the grouped mark and
// resolves them with the options (resolve); it runs at Start's first
// fetch and after an 'L' wake-up or a resubscription.
func (f *State) ReadLimits(ctx context.Context) error {
	e := &f.env
	pipe := e.RDB.Pipeline()
	lim := pipe.HGet(ctx, keyspace.LimitsKey(e.Prefix), e.Topic.Name())
	grp := pipe.HGet(ctx, keyspace.GroupedKey(e.Prefix), e.Topic.Name())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("rmq: read the limits of %s: %w", e.Topic.Name(), err)
	}
	return f.ApplyStored(ctx, lim, grp)
}

// ApplyStored takes the stored limits (lim) and grouped mark (grp).
func (f *State) ApplyStored(ctx context.Context, lim, grp *redis.StringCmd) error {
	if grp.Err() == nil {
		f.grouped.Store(true)
	}
	stored, found := "", lim.Err() == nil
	if found {
		stored = lim.Val()
	}
	return f.resolve(ctx, stored, found)
}

// resolve decides the limits in force: the stored ones win. When none are
// stored and the options ask for some, they are stored (HSETNX: of
// consumers starting together, the first wins, and the others obey it);
// options that differ from the stored limits are logged.
func (f *State) resolve(ctx context.Context, stored string, found bool) error {
	e := &f.env
	if !found && !f.opts.IsZero() {
		ok, err := e.RDB.HSetNX(ctx, keyspace.LimitsKey(e.Prefix), e.Topic.Name(), f.opts.String()).Result()
		if err != nil {
			return fmt.Errorf("rmq: store the limits of %s: %w", e.Topic.Name(), err)
		}
		if ok {
			f.set(f.opts)
			e.Log.InfoContext(ctx, "rmq: stored the topic's limits", "limits", f.opts.String())
			return nil
		}
		stored, err = e.RDB.HGet(ctx, keyspace.LimitsKey(e.Prefix), e.Topic.Name()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("rmq: read the limits of %s: %w", e.Topic.Name(), err)
		}
		found = err == nil
	}
	var l options.Limits
	if found {
		var err error
		if l, err = options.ParseLimits(stored); err != nil {
			e.Log.ErrorContext(ctx, "rmq: stored limits unreadable; keeping the ones in force", "err", err)
			return nil
		}
	}
	if old := f.Current(); old != l {
		f.set(l)
		if old != f.opts || !found {
			e.Log.InfoContext(ctx, "rmq: the topic's limits changed", "limits", l.String())
		}
	}
	if !f.opts.IsZero() && f.opts != l {
		e.Log.WarnContext(ctx, "rmq: the consumer's limit options differ from the topic's stored limits; the stored ones apply (rmq.Inspector.SetLimits changes them)",
			"options", f.opts.String(), "stored", l.String())
	}
	return nil
}

// EnsureLimits reads the stored limits again when a wake-up said they
// changed. A failed read keeps the ones in force and tries again next
// time.
func (f *State) EnsureLimits(ctx context.Context) {
	if !f.reread.Swap(false) {
		return
	}
	if err := f.ReadLimits(ctx); err != nil {
		f.reread.Store(true)
		f.env.Log.WarnContext(ctx, "rmq: read the topic's limits", "err", err)
	}
}
