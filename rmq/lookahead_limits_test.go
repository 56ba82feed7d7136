package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The lookahead follows the topic's limits in force, not those of the
// fetcher's start: a topic under a rate or a concurrency limit takes its
// messages at their instant (a held message would start the rate's count
// at its fetch, ahead of its instant), and so does one that gains a limit
// at run time (Inspector.SetLimits); one that loses its limits takes them
// ahead again.

// limitsApplied sends a message due now and waits for its delivery: the
// fetch that took it came after the 'L' wake-up of a SetLimits made
// before, so the client fetches under the new limits from then on.
func limitsApplied(t *testing.T, p *producer.Producer, tp topic.Topic, rec *recorder, body string) {
	t.Helper()
	_, err := p.SendFixedTime(ctxT(t), tp, []byte(body), time.Now())
	require.NoError(t, err)
	d := rec.next(t, 5*time.Second)
	require.Equal(t, body, d.Body)
}

func TestLookaheadStopsWhenTheTopicGainsALimit(t *testing.T) {
	for name, l := range map[string]rmq.Limits{
		"rate":        {Rate: 1000, RatePer: time.Second},
		"concurrency": {Concurrency: 100},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tp := mustTopic(t, "lookgain-"+name, topic.FixedTime, 4)
			rec := newRecorder(nil)
			c := e.client()
			require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead)))
			e.start(c)
			p := c.Producer()
			limitsApplied(t, p, tp, rec, "before")

			require.NoError(t, c.Inspector().SetLimits(ctxT(t), tp, l))
			limitsApplied(t, p, tp, rec, "after")

			due := time.Now().Add(1500 * time.Millisecond)
			_, err := p.SendFixedTime(ctxT(t), tp, []byte("b"), due, producer.WithKey("k"))
			require.NoError(t, err)
			e.requireNotTakenBefore(t, tp, "k", due, "taken before its instant under %s", l)
			d := rec.next(t, 5*time.Second)
			assert.Equal(t, "b", d.Body)
			assert.False(t, d.At.Before(d.DueAt))
			rec.drained(t, e, tp, counts{})
		})
	}
}

func TestLookaheadResumesWhenTheTopicLosesItsLimits(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookloss", topic.FixedTime, 4)
	c := e.client()
	require.NoError(t, c.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Rate: 1000, RatePer: time.Second}))
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead)))
	e.start(c)
	p := c.Producer()
	limitsApplied(t, p, tp, rec, "limited")

	require.NoError(t, c.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{}))
	limitsApplied(t, p, tp, rec, "unlimited")

	const ahead = 1800 * time.Millisecond
	due := time.Now().Add(ahead)
	_, err := p.SendFixedTime(ctxT(t), tp, []byte("b"), due, producer.WithKey("k"))
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Prepare, "k"); return ok }, 1200*time.Millisecond, time.Millisecond, "held before its instant")
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "b", d.Body)
	assert.False(t, d.At.Before(d.DueAt))
	rec.drained(t, e, tp, counts{})
}
