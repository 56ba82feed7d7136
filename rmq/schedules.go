package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/schedule"
	"github.com/rmq-go/rmq/producer"
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
	m         *schedule.Manager // its work; this type converts the results
	observers []Observer        // told of triggers
}

// Schedules returns the client's schedules.
func (c *Client) Schedules() *Schedules { return newSchedules(c.rdb, c.cfg, nil) }

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
	return newSchedules(rdb, cfg, bad)
}

// newSchedules returns the schedules of cfg's prefix on rdb; bad, when not
// nil, is returned by every call (else a nil rdb or a bad prefix is).
func newSchedules(rdb redis.UniversalClient, cfg config, bad error) *Schedules {
	nilClient := fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	return &Schedules{m: schedule.NewManager(rdb, cfg.prefix, cfg.maxBodySize, bad, nilClient), observers: cfg.observers}
}

// NextTicks returns the n ticks of spec in loc (nil: UTC) after from.
func NextTicks(spec string, loc *time.Location, from time.Time, n int) ([]time.Time, error) {
	return schedule.NextTicks(spec, loc, from, n)
}

// Set creates the schedule sc, or replaces the one of its name: the pending
// tick of the old one goes (if not due yet), and the new one's first tick
// is its spec's next after now. Every process sees the change at its next
// tick. A refused call writes nothing.
func (s *Schedules) Set(ctx context.Context, sc Schedule) error {
	return s.m.Set(ctx, schedule.Schedule(sc))
}

// Get returns the schedule name.
func (s *Schedules) Get(ctx context.Context, name string) (ScheduleInfo, error) {
	info, err := s.m.Get(ctx, name)
	return scheduleInfo(info), err
}

// List returns every schedule under the prefix, by name.
func (s *Schedules) List(ctx context.Context) ([]ScheduleInfo, error) {
	infos, err := s.m.List(ctx)
	return convertAll(infos, err, scheduleInfo)
}

// Remove deletes the schedule name; its pending tick goes too, unless it
// is due already (then it has fired).
func (s *Schedules) Remove(ctx context.Context, name string) error { return s.m.Remove(ctx, name) }

// Pause stops the schedule name at its next tick: the pending tick is
// removed (unless due already). Pausing a paused schedule does nothing.
func (s *Schedules) Pause(ctx context.Context, name string) error { return s.m.Pause(ctx, name) }

// Resume restarts a paused schedule from its next tick after now; ticks
// that passed while it was paused are not caught up. Resuming a running
// schedule does nothing.
func (s *Schedules) Resume(ctx context.Context, name string) error { return s.m.Resume(ctx, name) }

// Trigger fires the schedule name once now, besides its ticks (a paused one
// too), and returns the message id ("<name>@<now as Unix ms>").
func (s *Schedules) Trigger(ctx context.Context, name string) (string, error) {
	id, t, err := s.m.Trigger(ctx, name)
	if err == nil {
		each(s.observers, func(x ScheduleObserver) { x.TicksFired(name, t, 1) })
	}
	return id, err
}

// scheduleInfo is in with this package's types.
func scheduleInfo(in schedule.Info) ScheduleInfo {
	return ScheduleInfo{
		Schedule: Schedule(in.Schedule), Message: in.Message, Next: in.Next, LastFired: in.LastFired,
		Fired: in.Fired, Skipped: in.Skipped, UpdatedAt: in.UpdatedAt,
	}
}
