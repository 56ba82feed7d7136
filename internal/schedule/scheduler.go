package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Rolling forward. A schedule's pending tick is an ordinary fixed-time (or
// not-before priority) message sent ahead, so it fires on the consumers'
// timer, within milliseconds of its instant, whatever the schedulers do.
// Once it has fired, some scheduler sends the next one: every client's
// scheduler sleeps until the earliest pending tick of the slots it knows,
// plus rollDelay (so rolls do not compete with the deliveries of that very
// instant, a wave of them included) plus its own jitter (so the fleet does not roll in lockstep),
// then reads the slot's due schedules, plans their next ticks and rolls
// them in one schedule.lua call, fenced by each schedule's ver: whoever
// comes first rolls, a later call for the same plan changes nothing. The
// roll publishes the slot's new earliest tick on the events channel, so
// the other schedulers move their timers on without reading anything.
//
// Nothing is polled: a scheduler knows each slot's earliest pending tick
// from one read at (re)subscription and from the events after it, so a
// schedule costs Redis work only at its own ticks. A tick is sent ahead by
// at least its spec's interval minus rollDelay and jitter (cron and @every
// ticks are at least a second apart), so no running fleet misses one, and
// one a slowed-down fleet rolls late is fired late (lateGrace); the ticks
// of a fleet that was gone are the catch-up's.
const (
	rollDelay  = 200 * time.Millisecond
	rollJitter = 100 * time.Millisecond
	// dueLimit bounds the schedules one call reads and rolls (a few ms of
	// Redis time); a slot with more is rolled again at once.
	dueLimit = 256
	// retryMin and retryMax bound the backoff of a slot whose roll failed.
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
)

// Observer is told what the rolls of this scheduler did; rmq adapts its
// client observers to it. Calls come from the scheduler's goroutine.
type Observer interface {
	// TicksFired: n ticks of the schedule fired: its pending tick that came
	// due, and missed ones caught up. Each tick is counted by the one
	// scheduler that rolled it.
	TicksFired(name string, t topic.Topic, n int)
	// TicksSkipped: n missed ticks of the schedule older than its catch-up
	// window were skipped.
	TicksSkipped(name string, t topic.Topic, n int)
}

type slotID struct {
	topic string
	index int
}

// slotHead is what a scheduler knows of one topic slot with schedules.
type slotHead struct {
	topic   topic.Topic
	index   int
	head    int64     // earliest pending tick (ms, Redis's clock)
	retryAt time.Time // after a failed roll: not before (local clock)
	backoff time.Duration
}

// Scheduler rolls the schedules of one prefix forward. It is an actor of the
// library's one shape (internal/lifecycle): its owner runs Run in a
// lifecycle.Group, and it ends when ctx is done.
type Scheduler struct {
	store  *Store
	log    *slog.Logger
	obs    Observer // may be nil
	jitter time.Duration

	// Owned by the goroutine.
	slots  map[slotID]*slotHead
	offset time.Duration         // Redis's clock minus the local one, last seen
	specs  map[string]parsedSpec // stored definition -> parsed, so a roll parses a spec once

	// rolled is closed and replaced after every round of rolls (tests wait
	// on it).
	mu     sync.Mutex
	rolled chan struct{}
}

// NewScheduler returns a scheduler of store's schedules.
func NewScheduler(store *Store, log *slog.Logger, obs Observer) *Scheduler {
	return &Scheduler{
		store: store, log: log, obs: obs,
		jitter: time.Duration(rand.Int64N(int64(rollJitter))),
		slots:  map[slotID]*slotHead{},
		specs:  map[string]parsedSpec{},
		rolled: make(chan struct{}),
	}
}

// Rolled returns a channel closed after the scheduler's next round of
// rolls.
func (s *Scheduler) Rolled() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rolled
}

func (s *Scheduler) signalRolled() {
	s.mu.Lock()
	close(s.rolled)
	s.rolled = make(chan struct{})
	s.mu.Unlock()
}

// Run subscribes to the events channel, reads every slot's earliest tick
// and rolls the schedules forward until ctx is done.
func (s *Scheduler) Run(ctx context.Context) {
	ps := s.store.rdb.Subscribe(ctx, EventsChannel(s.store.prefix))
	// Closing the subscription ends go-redis's goroutines behind it.
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(4096))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait, ok := s.nextWake(); ok {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				// Subscribed, or subscribed again after a lost connection,
				// which may have lost events: read everything again.
				if m.Kind == "subscribe" {
					s.load(ctx)
				}
			case *redis.Message:
				s.apply(m.Payload)
			}
		case <-timer.C:
			s.rollDue(ctx)
		}
	}
}

// nextWake returns how long until the earliest slot is to be rolled.
func (s *Scheduler) nextWake() (time.Duration, bool) {
	var first time.Time
	for _, sl := range s.slots {
		at := s.rollAt(sl)
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(time.Until(first), 0), true
}

// rollAt is when (local clock) the scheduler rolls sl.
func (s *Scheduler) rollAt(sl *slotHead) time.Time {
	at := time.UnixMilli(sl.head).Add(rollDelay + s.jitter - s.offset)
	if sl.retryAt.After(at) {
		return sl.retryAt
	}
	return at
}

// apply takes an event: the earliest pending tick of a slot.
func (s *Scheduler) apply(payload string) {
	ev, err := parseEvent(payload)
	if err != nil {
		s.log.Warn("rmq: schedules: ignored event", "err", err)
		return
	}
	s.setHead(ev.topic, ev.index, ev.head)
}

func (s *Scheduler) setHead(t topic.Topic, index int, head int64) {
	id := slotID{t.Name(), index}
	if head <= 0 {
		delete(s.slots, id)
		return
	}
	sl, ok := s.slots[id]
	if !ok {
		sl = &slotHead{topic: t, index: index}
		s.slots[id] = sl
	}
	sl.head = head
}

// load reads every slot with schedules and its earliest pending tick. It
// replaces what the scheduler knew; events that come after it are newer.
func (s *Scheduler) load(ctx context.Context) {
	all, err := s.store.rdb.HGetAll(ctx, RegistryKey(s.store.prefix)).Result()
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "rmq: schedules: read the registry", "err", err)
		}
		return
	}
	type slotCmd struct {
		t     topic.Topic
		index int
		cmd   *redis.ZSliceCmd
	}
	seen := map[slotID]bool{}
	var cmds []slotCmd
	pipe := s.store.rdb.Pipeline()
	for name, raw := range all {
		reg, err := decodeRegistration(raw)
		if err != nil {
			continue
		}
		idx := SlotOf(name, reg.Topic)
		id := slotID{reg.Topic.Name(), idx}
		if seen[id] {
			continue
		}
		seen[id] = true
		cmds = append(cmds, slotCmd{reg.Topic, idx, pipe.ZRangeWithScores(ctx, KeysOf(s.store.prefix, reg.Topic, idx).Due, 0, 0)})
	}
	if len(cmds) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "rmq: schedules: read the pending ticks", "err", err)
			}
			return
		}
	}
	s.slots = map[slotID]*slotHead{}
	for _, c := range cmds {
		if z := c.cmd.Val(); len(z) > 0 {
			s.setHead(c.t, c.index, int64(z[0].Score))
		}
	}
}

// rollDue rolls every slot whose time has come: one pipelined read of their
// due schedules, one pipelined roll.
func (s *Scheduler) rollDue(ctx context.Context) {
	local := time.Now()
	var due []*slotHead
	for _, sl := range s.slots {
		if !s.rollAt(sl).After(local) {
			due = append(due, sl)
		}
	}
	if len(due) == 0 {
		return
	}
	reads := make([]scripts.Call, len(due))
	for i, sl := range due {
		reads[i] = s.call(sl, "due", dueLimit)
	}
	cmds := scripts.RunAll(ctx, s.store.rdb, reads)
	var rolls []scripts.Call
	var rolled []*slotHead
	var plans [][]rollPlan
	for i, sl := range due {
		ps, ok := s.planSlot(ctx, sl, cmds[i], local)
		if !ok || len(ps) == 0 {
			continue
		}
		args := []any{scripts.Nonce()}
		for _, p := range ps {
			args = append(args, p.args()...)
		}
		rolls = append(rolls, s.call(sl, "roll", args...))
		rolled = append(rolled, sl)
		plans = append(plans, ps)
	}
	if len(rolls) > 0 {
		for i, cmd := range scripts.RunAll(ctx, s.store.rdb, rolls) {
			s.rolledSlot(ctx, rolled[i], plans[i], cmd)
		}
	}
	s.signalRolled()
}

func (s *Scheduler) call(sl *slotHead, op string, args ...any) scripts.Call {
	a := append([]any{op, s.store.wakeCmd, EventsChannel(s.store.prefix), eventPrefix(sl.topic, sl.index)}, args...)
	return scripts.Call{Script: scripts.Schedule, Keys: KeysOf(s.store.prefix, sl.topic, sl.index).list(), Args: a}
}

// failed backs sl off after an error.
func (s *Scheduler) failed(ctx context.Context, sl *slotHead, what string, err error) {
	sl.backoff = min(max(sl.backoff*2, retryMin), retryMax)
	sl.retryAt = time.Now().Add(sl.backoff)
	if ctx.Err() == nil {
		s.log.WarnContext(ctx, "rmq: schedules: "+what, "topic", sl.topic.Name(), "slot", sl.index, "err", err)
	}
}

// planSlot reads a due reply and plans the rolls of its schedules; copies
// of schedules that their registration no longer names are removed.
func (s *Scheduler) planSlot(ctx context.Context, sl *slotHead, cmd *redis.Cmd, sent time.Time) ([]rollPlan, bool) {
	res, err := cmd.Slice()
	if err != nil || len(res) < 2 {
		s.failed(ctx, sl, "read due schedules", err)
		return nil, false
	}
	nowMs, _ := res[0].(int64)
	now := time.UnixMilli(nowMs)
	s.offset = now.Sub(sent)
	s.setHeadFrom(sl, res[1])
	if len(res) == 2 {
		return nil, true // rolled by another scheduler meanwhile
	}
	type entry struct {
		name  string
		state string
		def   string
	}
	var entries []entry
	names := make([]string, 0, (len(res)-2)/3)
	for i := 2; i+2 < len(res); i += 3 {
		e := entry{}
		e.name, _ = res[i].(string)
		e.state, _ = res[i+1].(string)
		e.def, _ = res[i+2].(string)
		entries = append(entries, e)
		names = append(names, e.name)
	}
	regs, err := s.store.rdb.HMGet(ctx, RegistryKey(s.store.prefix), names...).Result()
	if err != nil {
		s.failed(ctx, sl, "read the registry", err)
		return nil, false
	}
	var plans []rollPlan
	for i, e := range entries {
		st, err := parseState(e.state)
		if err != nil {
			s.failed(ctx, sl, "read a schedule", err)
			return nil, false
		}
		raw, _ := regs[i].(string)
		if reg, err := decodeRegistration(raw); err != nil || reg.Topic.Name() != sl.topic.Name() {
			// Not registered here: the leftover of a Set that moved the
			// schedule to another topic, or of a Remove, meeting a
			// concurrent Set; the registration is the truth.
			if _, err := s.store.removeFrom(ctx, sl.topic, e.name, st.Gen); err != nil && !errors.Is(err, ErrNotFound) {
				s.failed(ctx, sl, "remove an unregistered schedule", err)
				return nil, false
			}
			s.log.InfoContext(ctx, "rmq: schedules: removed a copy its registration does not name", "schedule", e.name, "topic", sl.topic.Name())
			continue
		}
		ps, err := s.parsed(e.def)
		if err != nil {
			s.failed(ctx, sl, "read the definition of "+e.name, err)
			return nil, false
		}
		plans = append(plans, plan(e.name, st, ps.spec, ps.catchUp, now))
	}
	return plans, true
}

// parsedSpec is a stored definition, parsed.
type parsedSpec struct {
	spec    Spec
	catchUp time.Duration
}

// maxSpecs bounds the scheduler's cache of parsed definitions; past it the
// cache starts over (a definition changes with every Set).
const maxSpecs = 100_000

func (s *Scheduler) parsed(raw string) (parsedSpec, error) {
	if p, ok := s.specs[raw]; ok {
		return p, nil
	}
	var d Def
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return parsedSpec{}, err
	}
	spec, err := d.Parse()
	if err != nil {
		return parsedSpec{}, err
	}
	if len(s.specs) >= maxSpecs {
		s.specs = map[string]parsedSpec{}
	}
	p := parsedSpec{spec: spec, catchUp: time.Duration(d.CatchUpMs) * time.Millisecond}
	s.specs[raw] = p
	return p, nil
}

// setHeadFrom sets sl's earliest tick from a reply field (” when none).
func (s *Scheduler) setHeadFrom(sl *slotHead, v any) {
	str, _ := v.(string)
	if str == "" {
		s.setHead(sl.topic, sl.index, 0)
		return
	}
	f, err := strconv.ParseFloat(str, 64)
	if err == nil {
		s.setHead(sl.topic, sl.index, int64(f))
	}
}

// rolledSlot reads a roll reply and tells the observer.
func (s *Scheduler) rolledSlot(ctx context.Context, sl *slotHead, plans []rollPlan, cmd *redis.Cmd) {
	res, err := cmd.Slice()
	if err != nil || len(res) != len(plans)+1 {
		s.failed(ctx, sl, "roll schedules", err)
		return
	}
	sl.backoff, sl.retryAt = 0, time.Time{}
	s.setHeadFrom(sl, res[0])
	for i, p := range plans {
		if code, _ := res[i+1].(int64); code != 1 || s.obs == nil {
			continue
		}
		s.obs.TicksFired(p.name, sl.topic, len(p.ticks))
		if p.skipped > 0 {
			s.obs.TicksSkipped(p.name, sl.topic, int(p.skipped))
		}
	}
}
