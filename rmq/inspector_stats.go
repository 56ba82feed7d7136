package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// Stats is a snapshot of one topic's queues, taken slot by slot (pipelined)
// at Redis's time Now. Store counts waiting messages, Prepare deliveries in
// flight, Dead the dead queue. A message re-sent while a delivery of it is
// in flight is counted in both Store and Prepare.
type Stats struct {
	Topic topic.Topic
	Now   time.Time // Redis's clock when the snapshot was taken

	Store, Prepare, Dead int64
	// Delayed counts priority messages waiting for their time (sent with
	// WithNotBefore or WithDelay, or retries in their backoff); they are
	// not in Store.
	Delayed int64
	// Paused reports whether the topic is paused (Inspector.Pause).
	Paused bool
	// Due counts the waiting messages that may be delivered now: those due
	// at or before Now for time-based topics, every waiting message for
	// priority topics.
	Due int64
	// NextDue is the earliest due time among waiting messages of a
	// time-based topic (zero when none wait). Before Now, it is the due
	// time of the oldest overdue message: see Lag.
	NextDue time.Time
	// TopPriority is the highest store score of a priority topic: the
	// priority that is delivered next, or 0..16 when only retries wait.
	TopPriority int64
	// OldestDeath and NewestDeath bound the times of death of the dead
	// queue (zero when it is empty).
	OldestDeath, NewestDeath time.Time
	// Grouped counts the messages that wait in their groups
	// (producer.WithGroup; docs/flow-control.md), also counted in Store;
	// Groups the groups that have messages waiting or in flight under a
	// limit. Due and NextDue count store's messages only.
	Grouped, Groups int64
	// Retained counts the records of finished messages the topic keeps
	// (completed and cancelled, while Lifecycle.Retention lasts; a record
	// past its time may be counted until a later finish of its slot trims
	// it or the slot's records expire), Events the entries of its event
	// logs (Lifecycle.Events, each slot's trimmed to about that many).
	Retained, Events int64
	// Limits are the topic's stored flow limits (zero: none).
	Limits Limits
	// Adaptive lists the adaptive concurrency limits the clients
	// consuming the topic with WithAdaptiveConcurrency reported.
	Adaptive []AdaptiveLimit

	Slots []SlotStats // one per slot, by index
}

// SlotStats is Stats for one slot.
type SlotStats struct {
	Slot                     int
	Store, Prepare, Dead     int64
	Grouped, Groups          int64
	Delayed                  int64
	Due                      int64
	NextDue                  time.Time
	TopPriority              int64
	OldestDeath, NewestDeath time.Time
	Retained, Events         int64
}

// Lag is how long the oldest overdue message has been due (zero when none
// is overdue, and for priority topics).
func (s Stats) Lag() time.Duration {
	if s.NextDue.IsZero() || !s.NextDue.Before(s.Now) {
		return 0
	}
	return s.Now.Sub(s.NextDue)
}

// Stats returns the counts of t's queues, per slot and in total, with the
// next due time (time-based topics) or top priority (priority topics), its
// limits and its consumers' adaptive limits. It reads thirteen values per
// slot in pipelines; it writes nothing.
func (i *Inspector) Stats(ctx context.Context, t topic.Topic) (Stats, error) {
	in, err := i.in.Stats(ctx, t)
	if err != nil {
		return Stats{}, err
	}
	limits, adaptive, err := i.in.Flow(ctx, t, in.Now)
	if err != nil {
		return Stats{}, err
	}
	st := statsOf(in)
	st.Limits = Limits(limits)
	for _, a := range adaptive {
		st.Adaptive = append(st.Adaptive, AdaptiveLimit(a))
	}
	return st, nil
}

// AllStats returns the Stats of every topic stored under the inspector's
// prefix, in Topics order. Any failed read fails the whole call, so a
// caller (a metrics scrape, a dashboard) never shows some topics from
// before an outage and none of the rest.
func (i *Inspector) AllStats(ctx context.Context) ([]Stats, error) {
	topics, err := i.Topics(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Stats, 0, len(topics))
	for _, t := range topics {
		st, err := i.Stats(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// statsOf is in with this package's types; the limits are not in it.
func statsOf(in inspect.Stats) Stats {
	st := Stats{
		Topic: in.Topic, Now: in.Now, Store: in.Store, Prepare: in.Prepare, Dead: in.Dead,
		Delayed: in.Delayed, Paused: in.Paused, Due: in.Due, NextDue: in.NextDue,
		TopPriority: in.TopPriority, OldestDeath: in.OldestDeath, NewestDeath: in.NewestDeath,
		Grouped: in.Grouped, Groups: in.Groups, Retained: in.Retained, Events: in.Events, Slots: make([]SlotStats, len(in.Slots)),
	}
	for j, s := range in.Slots {
		st.Slots[j] = SlotStats(s)
	}
	return st
}
