package inspect

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// Stats is rmq.Stats as this package makes it, without the flow limits,
// which rmq reads and adds.
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
	// Retained counts the finished messages' records kept (completed and
	// cancelled, Lifecycle.Retention), Events the entries of the event
	// logs (Lifecycle.Events).
	Retained, Events int64

	Slots []SlotStats // one per slot, by index
}

// SlotStats is rmq.SlotStats as this package makes it; rmq converts it.
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

// Stats is the work of rmq.Inspector.Stats, whose doc says what it does,
// but the flow limits and adaptive limits, which rmq adds after it.
func (i *Inspector) Stats(ctx context.Context, t topic.Topic) (Stats, error) {
	if err := i.check(ctx, t); err != nil {
		return Stats{}, err
	}
	now, err := i.rdb.Time(ctx).Result()
	if err != nil {
		return Stats{}, fmt.Errorf("rmq: stats of %s: %w", t.Name(), err)
	}
	st := Stats{Topic: t, Now: now, Slots: make([]SlotStats, t.SlotAmount())}
	timeBased := t.Type().TimeBased()
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	type slotCmds struct {
		store, prepare, dead, due, delayed *redis.IntCmd
		head, oldest, newest               *redis.ZSliceCmd
		gq, gturn                          *redis.IntCmd
		retained, events                   *redis.IntCmd
		storeTurn                          *redis.FloatCmd
	}
	cmds := make([]slotCmds, t.SlotAmount())
	err = i.pipelined(ctx, t.SlotAmount(), func(pipe redis.Pipeliner, s int) {
		k := i.keys(t, s)
		c := &cmds[s]
		c.store = pipe.ZCard(ctx, k.Store)
		c.prepare = pipe.ZCard(ctx, k.Prepare)
		c.dead = pipe.ZCard(ctx, k.Dead)
		c.delayed = pipe.ZCard(ctx, k.Delayed)
		if timeBased {
			c.due = pipe.ZCount(ctx, k.Store, "-inf", nowMs)
			c.head = pipe.ZRangeWithScores(ctx, k.Store, 0, 0)
		} else {
			c.head = pipe.ZRangeWithScores(ctx, k.Store, -1, -1)
		}
		c.oldest = pipe.ZRangeWithScores(ctx, k.Dead, 0, 0)
		c.newest = pipe.ZRangeWithScores(ctx, k.Dead, -1, -1)
		g := keyspace.GroupKeysFor(i.prefix, t, s)
		c.gq = pipe.ZCard(ctx, g.Queue)
		c.gturn = pipe.ZCard(ctx, g.Turn)
		c.storeTurn = pipe.ZScore(ctx, g.Turn, "")
		lk := keyspace.LifeKeysFor(i.prefix, t.Name(), s)
		c.retained = pipe.ZCard(ctx, lk.DoneQ) // one entry per record in done, written and trimmed with it
		c.events = pipe.XLen(ctx, lk.Events)
	})
	if err != nil {
		return Stats{}, fmt.Errorf("rmq: stats of %s: %w", t.Name(), err)
	}
	if st.Paused, err = i.Paused(ctx, t); err != nil {
		return Stats{}, err
	}
	first := func(c *redis.ZSliceCmd) (float64, bool) {
		if v := c.Val(); len(v) > 0 {
			return v[0].Score, true
		}
		return 0, false
	}
	for s := range cmds {
		c := &cmds[s]
		ss := SlotStats{Slot: s, Store: c.store.Val(), Prepare: c.prepare.Val(), Dead: c.dead.Val(), Delayed: c.delayed.Val(),
			Grouped: c.gq.Val(), Groups: c.gturn.Val(), Retained: c.retained.Val(), Events: c.events.Val()}
		if c.storeTurn.Err() == nil {
			ss.Groups-- // the store's own turn is no group
		}
		ss.Store += ss.Grouped
		if head, ok := first(c.head); ok {
			if timeBased {
				ss.NextDue = time.UnixMilli(int64(head))
				if st.NextDue.IsZero() || ss.NextDue.Before(st.NextDue) {
					st.NextDue = ss.NextDue
				}
			} else {
				ss.TopPriority = int64(head)
				st.TopPriority = max(st.TopPriority, ss.TopPriority)
			}
		}
		if timeBased {
			ss.Due = c.due.Val()
		} else {
			ss.Due = ss.Store
		}
		if d, ok := first(c.oldest); ok {
			ss.OldestDeath = time.UnixMilli(int64(d))
			if st.OldestDeath.IsZero() || ss.OldestDeath.Before(st.OldestDeath) {
				st.OldestDeath = ss.OldestDeath
			}
		}
		if d, ok := first(c.newest); ok {
			ss.NewestDeath = time.UnixMilli(int64(d))
			if ss.NewestDeath.After(st.NewestDeath) {
				st.NewestDeath = ss.NewestDeath
			}
		}
		st.Store += ss.Store
		st.Prepare += ss.Prepare
		st.Dead += ss.Dead
		st.Delayed += ss.Delayed
		st.Due += ss.Due
		st.Grouped += ss.Grouped
		st.Groups += ss.Groups
		st.Retained += ss.Retained
		st.Events += ss.Events
		st.Slots[s] = ss
	}
	return st, nil
}
