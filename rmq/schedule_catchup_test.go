package rmq_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// tickCounts is an rmq.Observer with the ScheduleObserver extension.
type tickCounts struct {
	rmq.BaseObserver
	mu             sync.Mutex
	fired, skipped map[string]int
}

func newTickCounts() *tickCounts {
	return &tickCounts{fired: map[string]int{}, skipped: map[string]int{}}
}

func (o *tickCounts) TicksFired(name string, _ topic.Topic, n int)   { o.add(o.fired, name, n) }
func (o *tickCounts) TicksSkipped(name string, _ topic.Topic, n int) { o.add(o.skipped, name, n) }
func (o *tickCounts) get(name string) (fired, skipped int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fired[name], o.skipped[name]
}
func (o *tickCounts) add(m map[string]int, name string, n int) {
	o.mu.Lock()
	m[name] += n
	o.mu.Unlock()
}

var _ rmq.ScheduleObserver = (*tickCounts)(nil)

// Ticks missed while no scheduler ran: those within CatchUp fire once each
// when a scheduler comes, the older ones are skipped and counted; with no
// CatchUp all are skipped but those at most a second overdue (a scheduler
// that is late rather than gone fires its tick late).
func TestScheduleCatchUp(t *testing.T) {
	t.Parallel()
	for _, catchUp := range []time.Duration{2500 * time.Millisecond, 0} {
		t.Run(catchUp.String(), func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, e *env) {
				ctx := ctxT(t)
				tp := mustTopic(t, "catch-up", topic.FixedTime, 2)
				// A tick sent at or after its instant was caught up (its first
				// send is the roll's Redis time); one sent ahead was not.
				var sentLate sync.Map
				rec := newRecorder(func(_ context.Context, m *consumer.Message) error {
					sentLate.Store(m.ID, !m.FirstSentAt.Before(m.DueAt))
					return nil
				})
				// A consumer that does not schedule: the pending tick fires on
				// the timer, and nothing sends the next ones.
				c := e.client(rmq.WithoutScheduler())
				require.NoError(t, c.Register(tp, rec))
				e.start(c)
				s := c.Schedules()
				require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "missed", Spec: "@every 1s", Topic: tp, Body: []byte("m"), CatchUp: catchUp}))
				info, err := s.Get(ctx, "missed")
				require.NoError(t, err)
				first := info.Next
				d := rec.next(t, waitLong)
				assert.Equal(t, first, d.DueAt)
				rec.none(t, time.Until(first.Add(5500*time.Millisecond)))

				obs := newTickCounts()
				sched := e.client(rmq.WithObserver(obs))
				e.start(sched)
				// The round that rolled, or the one after it.
				select {
				case <-rmq.SchedulerRolled(sched):
				case <-time.After(waitLong):
					t.Fatal("the scheduler did not roll")
				}
				ds := append([]delivery{d}, collect(rec, time.Now().Add(1500*time.Millisecond))...)
				ticks := checkTicks(t, "missed", ds, 0)
				info, err = s.Get(ctx, "missed")
				require.NoError(t, err)
				// After the first tick: a gap of skipped ticks, then the caught-up
				// ones (late: fired when the scheduler came) and the ticks it now
				// sends ahead, consecutive.
				require.GreaterOrEqual(t, len(ticks), 2, "ticks %v", ticks)
				checkTicks(t, "missed", ds[1:], time.Second)
				gap := (ticks[1]-ticks[0])/1000 - 1
				assert.Equal(t, info.Skipped, gap, "skipped ticks between %d and %d", ticks[0], ticks[1])
				caughtUp := 0
				for _, x := range ds[1:] {
					if late, _ := sentLate.Load(x.ID); late.(bool) {
						caughtUp++
					}
				}
				fired, skipped := obs.get("missed")
				assert.Equal(t, int(info.Skipped), skipped, "skipped told the observer")
				// The first roll: the tick that came due and the caught-up
				// ones; later rolls one each.
				assert.GreaterOrEqual(t, fired, 1+caughtUp)
				if catchUp == 0 {
					// Only what a scheduler that was merely late would fire:
					// ticks at most a second overdue.
					assert.Contains(t, []int{1, 2}, caughtUp, "deliveries %v", ds)
					assert.GreaterOrEqual(t, gap, int64(3))
				} else {
					assert.Contains(t, []int{2, 3}, caughtUp, "deliveries %v", ds)
					assert.GreaterOrEqual(t, gap, int64(2))
				}
			})
		})
	}
}

// Bad input is refused with a clear error, and nothing is written.
func TestScheduleBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		c := e.client(rmq.WithMaxBodySize(16))
		s := c.Schedules()
		fixed := mustTopic(t, "bad-fixed", topic.FixedTime, 1)
		prio := mustTopic(t, "bad-prio", topic.Priority, 1)
		merge := mustTopic(t, "bad-merge", topic.RangeMerge, 1)
		ok := rmq.Schedule{Name: "ok", Spec: "@every 1m", Topic: fixed, Body: []byte("b")}
		with := func(f func(*rmq.Schedule)) rmq.Schedule {
			sc := ok
			f(&sc)
			return sc
		}
		manyHeaders := map[string]string{}
		for i := range producer.MaxHeaders {
			manyHeaders[strings.Repeat("h", i+1)] = "v"
		}
		cases := map[string]struct {
			sc   rmq.Schedule
			also error
		}{
			"empty name":        {sc: with(func(s *rmq.Schedule) { s.Name = "" })},
			"name with a space": {sc: with(func(s *rmq.Schedule) { s.Name = "a b" })},
			"name with braces":  {sc: with(func(s *rmq.Schedule) { s.Name = "a{b}" })},
			"long name":         {sc: with(func(s *rmq.Schedule) { s.Name = strings.Repeat("n", 129) })},
			"zero topic":        {sc: with(func(s *rmq.Schedule) { s.Topic = topic.Topic{} })},
			"range-merge topic": {sc: with(func(s *rmq.Schedule) { s.Topic = merge }), also: producer.ErrTypeMismatch},
			"priority on fixed": {sc: with(func(s *rmq.Schedule) { s.Priority = 20 })},
			"no priority":       {sc: with(func(s *rmq.Schedule) { s.Topic = prio }), also: producer.ErrInvalidPriority},
			"low priority":      {sc: with(func(s *rmq.Schedule) { s.Topic, s.Priority = prio, 16 }), also: producer.ErrInvalidPriority},
			"empty body":        {sc: with(func(s *rmq.Schedule) { s.Body = nil }), also: producer.ErrEmptyBody},
			"large body":        {sc: with(func(s *rmq.Schedule) { s.Body = make([]byte, 17) }), also: producer.ErrBodyTooLarge},
			"bad spec":          {sc: with(func(s *rmq.Schedule) { s.Spec = "61 * * * *" })},
			"empty spec":        {sc: with(func(s *rmq.Schedule) { s.Spec = "" })},
			"sub-second every":  {sc: with(func(s *rmq.Schedule) { s.Spec = "@every 500ms" })},
			"unknown zone":      {sc: with(func(s *rmq.Schedule) { s.Spec = "CRON_TZ=Mars/Base 0 * * * *" })},
			"local location":    {sc: with(func(s *rmq.Schedule) { s.Location = time.Local })},
			"fixed zone":        {sc: with(func(s *rmq.Schedule) { s.Location = time.FixedZone("X", 3600) })},
			"never fires":       {sc: with(func(s *rmq.Schedule) { s.Spec = "0 0 30 2 *" })},
			"negative catch-up": {sc: with(func(s *rmq.Schedule) { s.CatchUp = -time.Second })},
			"a key":             {sc: with(func(s *rmq.Schedule) { s.Options = []producer.SendOption{producer.WithKey("k")} }), also: producer.ErrInvalidRecurring},
			"a slot basis":      {sc: with(func(s *rmq.Schedule) { s.Options = []producer.SendOption{producer.WithSlotBasis([]byte("k"))} }), also: producer.ErrInvalidRecurring},
			"an expiry": {sc: with(func(s *rmq.Schedule) {
				s.Options = []producer.SendOption{producer.WithExpiresAt(time.Now().Add(time.Hour))}
			}), also: producer.ErrInvalidRecurring},
			"a not-before": {sc: with(func(s *rmq.Schedule) {
				s.Topic, s.Priority, s.Options = prio, 20, []producer.SendOption{producer.WithDelay(time.Second)}
			}), also: producer.ErrInvalidRecurring},
			"bad max retries": {sc: with(func(s *rmq.Schedule) { s.Options = []producer.SendOption{producer.WithMaxRetries(-1)} }), also: producer.ErrInvalidMaxRetries},
			"the schedule header": {sc: with(func(s *rmq.Schedule) {
				s.Options = []producer.SendOption{producer.WithHeaders(map[string]string{rmq.ScheduleHeader: "x"})}
			})},
			"too many headers": {sc: with(func(s *rmq.Schedule) { s.Options = []producer.SendOption{producer.WithHeaders(manyHeaders)} }), also: producer.ErrInvalidHeaders},
		}
		for name, c := range cases {
			err := s.Set(ctx, c.sc)
			assert.ErrorIs(t, err, rmq.ErrInvalidSchedule, name)
			if c.also != nil {
				assert.ErrorIs(t, err, c.also, name)
			}
			assert.Empty(t, e.keysNow(), "%s wrote keys", name)
		}
		// A topic defined otherwise: refused before the schedule is written.
		_, err := c.Producer().SendPriority(ctx, mustTopic(t, "taken", topic.Priority, 1), []byte("x"), 20)
		require.NoError(t, err)
		before := e.dump()
		err = s.Set(ctx, with(func(s *rmq.Schedule) { s.Topic = mustTopic(t, "taken", topic.FixedTime, 1) }))
		assert.ErrorIs(t, err, topic.ErrConflict)
		assert.Equal(t, before, e.dump())
		for _, bad := range []string{"", "a b", strings.Repeat("n", 129)} {
			_, err := s.Get(ctx, bad)
			assert.ErrorIs(t, err, rmq.ErrInvalidSchedule)
			assert.ErrorIs(t, s.Remove(ctx, bad), rmq.ErrInvalidSchedule)
		}
		_, err = rmq.NextTicks("bad", nil, time.Now(), 1)
		assert.ErrorIs(t, err, rmq.ErrInvalidSchedule)
	})
}
