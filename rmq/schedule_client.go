package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/internal/schedule"
	"github.com/rmq-go/rmq/topic"
)

// WithoutScheduler keeps the client out of firing schedules: it manages
// them (Client.Schedules) but never rolls one forward. By default every
// started client takes part, and each tick fires once across all of them.
func WithoutScheduler() Option { return clientOption(func(c *config) { c.noScheduler = true }) }

// ScheduleObserver is an optional extension of Observer: an observer given
// to WithObserver that also implements it is told what the client's
// scheduler did. Calls come from the scheduler's goroutine (and from
// Schedules.Trigger) and must not block.
type ScheduleObserver interface {
	// TicksFired: n ticks of the schedule fired (a tick that came due, and
	// missed ticks caught up with it, or a Trigger). Across a fleet each
	// tick is counted by the one client that rolled it forward.
	TicksFired(schedule string, t topic.Topic, n int)
	// TicksSkipped: n missed ticks of the schedule were older than its
	// CatchUp and skipped.
	TicksSkipped(schedule string, t topic.Topic, n int)
}

// ScheduleTick tells a tick from other messages: for a message a schedule
// sent, it returns the schedule's name and the tick's instant (a
// fixed-time tick's DueAt; a priority tick's not-before time, from its id).
// Tick lateness is the delivery time minus the tick.
func ScheduleTick(m *consumer.Message) (name string, tick time.Time, ok bool) {
	name, ok = m.Headers[ScheduleHeader]
	if !ok {
		return "", time.Time{}, false
	}
	if !m.DueAt.IsZero() {
		return name, m.DueAt, true
	}
	if tick, ok = schedule.TickOf(m.ID); !ok {
		return "", time.Time{}, false
	}
	return name, tick, true
}

// clientScheduler is the client's part in firing schedules: one actor
// (internal/schedule), started by Start after the consumers, stopped by
// Close before them (it sends ticks: senders stop before receivers).
type clientScheduler struct {
	sched  *schedule.Scheduler
	actors *lifecycle.Group
}

// startScheduler starts the scheduler unless WithoutScheduler. Its context
// is the client's lifetime, not Start's. Under the client's lock, so that a
// Close that came meanwhile finds it started, or it does not start.
func (c *Client) startScheduler() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.noScheduler || c.phase == lifecycle.Closed {
		return
	}
	var so schedule.Observer
	each(c.cfg.observers, func(ScheduleObserver) { so = c.obs })
	c.sched.sched = schedule.NewScheduler(schedule.NewStore(c.rdb, c.cfg.prefix), c.log, so)
	c.sched.actors = lifecycle.NewGroup(context.Background())
	c.sched.actors.Go("scheduler", c.sched.sched.Run)
}

// stopScheduler stops the scheduler and waits for it. A tick it was rolling
// is either rolled or left to the others: a roll is one script call.
func (c *Client) stopScheduler() {
	c.mu.Lock()
	actors := c.sched.actors
	c.mu.Unlock()
	if actors != nil {
		actors.Stop()
	}
}

// TicksFired and TicksSkipped tell the observers that implement
// ScheduleObserver: the client's scheduler's observer.

func (o *observers) TicksFired(name string, t topic.Topic, n int) {
	each(o.list, func(x ScheduleObserver) { x.TicksFired(name, t, n) })
}

func (o *observers) TicksSkipped(name string, t topic.Topic, n int) {
	each(o.list, func(x ScheduleObserver) { x.TicksSkipped(name, t, n) })
}
