package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/schedule"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

var (
	// ErrInvalidSchedule is returned by Schedules.Set (and NextTicks) for a
	// bad name, spec, location, catch-up, body, option, or a priority on a
	// fixed-time topic; nothing is written. Errors that also have a
	// sentinel of their own (producer.ErrTypeMismatch for a range-merge
	// topic, producer.ErrEmptyBody, ...) match both.
	ErrInvalidSchedule = schedule.ErrInvalid
	// ErrScheduleNotFound is returned for a name with no schedule.
	ErrScheduleNotFound = schedule.ErrNotFound
)

// ScheduleHeader is the header every tick carries; its value is the
// schedule's name.
const ScheduleHeader = schedule.HeaderName

// Schedule is a periodic message: at each tick of Spec, one message on
// Topic with the key "<Name>@<tick as Unix ms>".
//
// Ticks follow the wall clock of the schedule's location. A wall time that
// does not exist there (the hour skipped when clocks go forward) fires once
// at the first instant after the gap; a wall time that occurs twice (the
// hour repeated when clocks go back) fires once, at its first occurrence.
// "@every" intervals are real time and ignore the location.
type Schedule struct {
	Name string // [A-Za-z0-9._-]{1,128}, unique per prefix
	// Spec is a cron spec "m h dom mon dow", or six fields when the first
	// is seconds; @yearly, @monthly, @weekly, @daily, @hourly; "@every 90s"
	// (whole seconds, at least 1s); optionally after a "CRON_TZ=Area/City "
	// prefix.
	Spec     string
	Location *time.Location // nil: UTC; a CRON_TZ= prefix in Spec wins
	// Topic receives the ticks: on a FixedTime topic each is due at its
	// instant (Message.DueAt is the tick); on a Priority topic it competes
	// at Priority from its instant on.
	Topic    topic.Topic
	Priority int64 // Priority topics only
	Body     []byte
	// Options of each tick's message: producer.WithHeaders, WithMaxRetries,
	// WithTTL (counted from each tick) and WithTimeout.
	Options []producer.SendOption
	// CatchUp: ticks missed while no scheduler ran are fired (each once, at
	// most 1,000) if they are at most this old when a scheduler finds
	// them; older ones are skipped and counted. 0: all skipped.
	CatchUp time.Duration
	Paused  bool
}

// ScheduleInfo is a stored schedule and what it did.
type ScheduleInfo struct {
	Schedule
	// Message is the tick options, read back (Schedule.Options rebuilds them).
	Message   producer.RecurringOptions
	Next      time.Time // the next tick; zero while paused
	LastFired time.Time // the latest tick (or Trigger) that fired; zero: none
	Fired     int64     // ticks fired, triggers and caught-up ones included
	Skipped   int64     // missed ticks not caught up
	UpdatedAt time.Time // when it was last Set
}

// Schedules manages the schedules under the client's prefix. Every started
// client (without WithoutScheduler) fires them: each tick exactly once
// across all the clients of the prefix. It works before Start and after
// Close.
type Schedules struct {
	rdb   redis.UniversalClient
	cfg   config
	store *schedule.Store
	err   error // a configuration error, returned by every call
}

// Schedules returns the client's schedules.
func (c *Client) Schedules() *Schedules { return newSchedules(c.rdb, c.cfg) }

// NewSchedules manages the schedules under the prefix of opts
// (WithPrefix) on rdb without a client, as NewInspector does for queues:
// tools manage schedules that the fleet's clients fire. WithMaxBodySize
// bounds the bodies it accepts, WithObserver is told of triggers.
func NewSchedules(rdb redis.UniversalClient, opts ...Option) *Schedules {
	cfg := defaultConfig()
	var bad error
	for _, o := range opts {
		if o == nil {
			bad = fmt.Errorf("%w: nil option", ErrInvalidOption)
			continue
		}
		o.applyClient(&cfg)
	}
	s := newSchedules(rdb, cfg)
	switch {
	case rdb == nil:
		s.err = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	case bad != nil:
		s.err = bad
	}
	return s
}

func newSchedules(rdb redis.UniversalClient, cfg config) *Schedules {
	s := &Schedules{rdb: rdb, cfg: cfg, err: slots.ValidatePrefix(cfg.prefix)}
	if rdb != nil {
		s.store = schedule.NewStore(rdb, cfg.prefix)
	}
	return s
}

// NextTicks returns the n ticks of spec in loc (nil: UTC) after from.
func NextTicks(spec string, loc *time.Location, from time.Time, n int) ([]time.Time, error) {
	return schedule.NextTicks(spec, loc, from, n)
}

// maxCatchUp bounds Schedule.CatchUp.
const maxCatchUp = 100 * 365 * 24 * time.Hour

// Set creates the schedule sc, or replaces the one of its name: the pending
// tick of the old one goes (if not due yet), and the new one's first tick
// is its spec's next after now. Every process sees the change at its next
// tick. A refused call writes nothing.
func (s *Schedules) Set(ctx context.Context, sc Schedule) error {
	if s.err != nil {
		return s.err
	}
	spec, def, msg, err := s.check(sc)
	if err != nil {
		return err
	}
	// Everything is valid: only now is anything written.
	if err := topicstore.Define(ctx, s.rdb, slots.TopicsKey(s.cfg.prefix), sc.Topic); err != nil {
		return err
	}
	return s.store.Put(ctx, sc.Name, sc.Topic, def, msg, spec, sc.Paused)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidSchedule}, a...)...)
}

// check validates sc and returns what is stored of it.
func (s *Schedules) check(sc Schedule) (schedule.Spec, schedule.Def, schedule.Message, error) {
	var none schedule.Spec
	if err := checkScheduleName(sc.Name); err != nil {
		return none, schedule.Def{}, schedule.Message{}, err
	}
	if sc.Topic.IsZero() {
		return none, schedule.Def{}, schedule.Message{}, invalid("zero Topic (use topic.New)")
	}
	msg := schedule.Message{Type: sc.Topic.Type()}
	switch sc.Topic.Type() {
	case topic.FixedTime:
		if sc.Priority != 0 {
			return none, schedule.Def{}, schedule.Message{}, invalid("priority %d on fixed-time topic %s", sc.Priority, sc.Topic.Name())
		}
	case topic.Priority:
		if sc.Priority < topic.MinPriority || sc.Priority > 1<<53 {
			return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w: %d (want %d <= priority <= 2^53)", ErrInvalidSchedule, producer.ErrInvalidPriority, sc.Priority, topic.MinPriority)
		}
		msg.Priority = sc.Priority
	default:
		return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w: topic %s is %s; ticks go to fixed-time or priority topics", ErrInvalidSchedule, producer.ErrTypeMismatch, sc.Topic.Name(), sc.Topic.Type())
	}
	if len(sc.Body) == 0 {
		return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w", ErrInvalidSchedule, producer.ErrEmptyBody)
	}
	if len(sc.Body) > s.cfg.maxBodySize {
		return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w: %d bytes (limit %d)", ErrInvalidSchedule, producer.ErrBodyTooLarge, len(sc.Body), s.cfg.maxBodySize)
	}
	msg.Body = sc.Body
	if sc.CatchUp < 0 || sc.CatchUp > maxCatchUp {
		return none, schedule.Def{}, schedule.Message{}, invalid("catch-up %v (want 0..100 years)", sc.CatchUp)
	}
	spec, err := schedule.Parse(sc.Spec, sc.Location)
	if err != nil {
		return none, schedule.Def{}, schedule.Message{}, err
	}
	locName, err := schedule.LocationName(sc.Location)
	if err != nil {
		return none, schedule.Def{}, schedule.Message{}, err
	}
	rec, err := producer.ParseRecurring(sc.Topic.Type(), sc.Options...)
	if err != nil {
		return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w", ErrInvalidSchedule, err)
	}
	if _, taken := rec.Headers[ScheduleHeader]; taken {
		return none, schedule.Def{}, schedule.Message{}, invalid("header %s is the schedule's own", ScheduleHeader)
	}
	if len(rec.Headers) >= producer.MaxHeaders {
		return none, schedule.Def{}, schedule.Message{}, fmt.Errorf("%w: %w: %d headers and %s (limit %d)", ErrInvalidSchedule, producer.ErrInvalidHeaders, len(rec.Headers), ScheduleHeader, producer.MaxHeaders)
	}
	headers := map[string]string{ScheduleHeader: sc.Name}
	for k, v := range rec.Headers {
		headers[k] = v
	}
	o := scripts.Options{Headers: headers, TimeoutMs: int64((rec.Timeout + time.Millisecond - 1) / time.Millisecond)}
	if rec.MaxRetries >= 0 {
		o.MaxRetries, o.HasMaxRetries = rec.MaxRetries, true
	}
	msg.Options = scripts.EncodeOptions(o)
	msg.TTLMs = int64((rec.TTL + time.Millisecond - 1) / time.Millisecond)
	def := schedule.Def{Spec: sc.Spec, Location: locName, CatchUpMs: sc.CatchUp.Milliseconds()}
	return spec, def, msg, nil
}

// checkScheduleName accepts [A-Za-z0-9._-]{1,128}.
func checkScheduleName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return invalid("name of %d bytes (want 1..128)", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalid("name %q (want [A-Za-z0-9._-])", name)
		}
	}
	return nil
}

// Get returns the schedule name.
func (s *Schedules) Get(ctx context.Context, name string) (ScheduleInfo, error) {
	if s.err != nil {
		return ScheduleInfo{}, s.err
	}
	if err := checkScheduleName(name); err != nil {
		return ScheduleInfo{}, err
	}
	rec, now, err := s.store.Get(ctx, name)
	if err != nil {
		return ScheduleInfo{}, err
	}
	return scheduleInfo(rec, now)
}

// List returns every schedule under the prefix, by name.
func (s *Schedules) List(ctx context.Context) ([]ScheduleInfo, error) {
	if s.err != nil {
		return nil, s.err
	}
	recs, now, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, 0, len(recs))
	for _, rec := range recs {
		info, err := scheduleInfo(rec, now)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Remove deletes the schedule name; its pending tick goes too, unless it
// is due already (then it has fired).
func (s *Schedules) Remove(ctx context.Context, name string) error {
	if s.err != nil {
		return s.err
	}
	if err := checkScheduleName(name); err != nil {
		return err
	}
	return s.store.Remove(ctx, name)
}

// Pause stops the schedule name at its next tick: the pending tick is
// removed (unless due already). Pausing a paused schedule does nothing.
func (s *Schedules) Pause(ctx context.Context, name string) error {
	if s.err != nil {
		return s.err
	}
	if err := checkScheduleName(name); err != nil {
		return err
	}
	return s.store.Pause(ctx, name)
}

// Resume restarts a paused schedule from its next tick after now; ticks
// that passed while it was paused are not caught up. Resuming a running
// schedule does nothing.
func (s *Schedules) Resume(ctx context.Context, name string) error {
	if s.err != nil {
		return s.err
	}
	if err := checkScheduleName(name); err != nil {
		return err
	}
	return s.store.Resume(ctx, name)
}

// Trigger fires the schedule name once now, besides its ticks (a paused one
// too), and returns the message id ("<name>@<now as Unix ms>").
func (s *Schedules) Trigger(ctx context.Context, name string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if err := checkScheduleName(name); err != nil {
		return "", err
	}
	id, t, err := s.store.Trigger(ctx, name)
	if err == nil {
		for _, o := range s.cfg.observers {
			if so, ok := o.(ScheduleObserver); ok {
				so.TicksFired(name, t, 1)
			}
		}
	}
	return id, err
}

// scheduleInfo converts a stored schedule at Redis time now. A pending
// tick that is due has fired, though no scheduler may have rolled it yet.
func scheduleInfo(rec schedule.Record, now time.Time) (ScheduleInfo, error) {
	loc, err := schedule.LoadLocation(rec.Def.Location)
	if err != nil {
		return ScheduleInfo{}, err
	}
	opts, err := scripts.DecodeOptions(rec.Message.Options)
	if err != nil && len(rec.Message.Options) > 0 {
		return ScheduleInfo{}, fmt.Errorf("rmq: schedule %s: %w", rec.Name, err)
	}
	ro := producer.RecurringOptions{MaxRetries: -1, TTL: time.Duration(rec.Message.TTLMs) * time.Millisecond, Timeout: time.Duration(opts.TimeoutMs) * time.Millisecond}
	if opts.HasMaxRetries {
		ro.MaxRetries = opts.MaxRetries
	}
	for k, v := range opts.Headers {
		if k != ScheduleHeader {
			if ro.Headers == nil {
				ro.Headers = map[string]string{}
			}
			ro.Headers[k] = v
		}
	}
	st := rec.State
	info := ScheduleInfo{
		Schedule: Schedule{
			Name: rec.Name, Spec: rec.Def.Spec, Location: loc, Topic: rec.Topic, Body: rec.Message.Body,
			Options: ro.SendOptions(), CatchUp: time.Duration(rec.Def.CatchUpMs) * time.Millisecond, Paused: st.Paused,
		},
		Message: ro, Fired: st.Fired, Skipped: st.Skipped, UpdatedAt: time.UnixMilli(rec.Def.UpdatedMs),
	}
	if rec.Message.Type == topic.Priority {
		info.Priority = rec.Message.Priority
	}
	last := st.Last
	if st.Next > 0 {
		next := time.UnixMilli(st.Next)
		if !next.After(now) {
			info.Fired++
			last = max(last, st.Next)
			if spec, err := rec.Def.Parse(); err == nil {
				if next = spec.Next(next); !next.After(now) {
					next = spec.Next(now)
				}
			}
		}
		info.Next = next
	}
	if last > 0 {
		info.LastFired = time.UnixMilli(last)
	}
	return info, nil
}
