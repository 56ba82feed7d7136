package rmq_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Flow control across a fleet: every test runs on a single node
// and on a cluster, with three consumers: two clients in this process and
// one in a worker process (flow_helpers_test.go).

// sendBacklog sends n fixed-time messages due now (in order, 1 ms apart in
// the past), of group(i) ("" for none), keys prefix-i.
func sendBacklog(t *testing.T, e *env, tp topic.Topic, prefix string, n int, group func(i int) string) {
	t.Helper()
	p := producerOn(t, e.rdb, e.prefix)
	base := time.Now().Add(-time.Minute)
	msgs := make([]producer.BatchMessage, n)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("%s-%d", prefix, i)), Key: fmt.Sprintf("%s-%05d", prefix, i),
			At: base.Add(time.Duration(i) * time.Millisecond)}
		if g := group(i); g != "" {
			msgs[i].Options = []producer.SendOption{producer.WithGroup(g)}
		}
	}
	_, err := p.SendBatch(ctxT(t), tp, msgs)
	require.NoError(t, err)
}

func noGroup(int) string { return "" }

// startFleet starts the two in-process consumers of the fleet, with the
// limits' options and concurrency, holding each message for hold.
func startFleet(t *testing.T, e *env, tp topic.Topic, l rmq.Limits, conc int, hold time.Duration, log *flowLog, then func(*consumer.Message) error) {
	t.Helper()
	for i := range 2 {
		rdb := e.newRedis()
		rdb.AddHook(redistest.Observer{After: log.clock.after})
		c := e.clientOn(rdb)
		opts := append(flowOptions(l), consumer.WithConcurrency(conc))
		require.NoError(t, c.Register(tp, log.listener(fmt.Sprintf("client%d", i), hold, then), opts...))
		e.start(c)
	}
}

// A topic limited to 50/s with a backlog of 400 never starts more than 50
// (plus the burst, 5; on a cluster one more) in any 1 s window, and still sustains at least 45/s.
// A message held back is not leased and counts no attempt.
func TestFlowRateLimitHoldsAcrossTheFleet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "rate", topic.FixedTime, 4)
		l := rmq.Limits{Rate: 50, RatePer: time.Second}
		log := newFlowLog()
		sendBacklog(t, e, tp, "r", 400, noGroup)
		var retried atomic.Int64
		startFleet(t, e, tp, l, 20, 0, log, func(m *consumer.Message) error {
			if m.Attempt != 1 {
				retried.Add(1)
			}
			return nil
		})
		startFlowWorker(t, e, tp, l, 20, "0s", "", log)
		// While the backlog drains at 50/s (here a second's worth has
		// started), the held-back messages wait in store: what is in
		// flight is about the last 100 ms of starts.
		log.waitDistinct(t, 50, 15*time.Second)
		st, err := e.client().Inspector().Stats(ctxT(t), tp)
		require.NoError(t, err)
		assert.Less(t, st.Prepare, int64(60), "held-back messages are not leased")
		assert.Equal(t, rmq.Limits{Rate: 50, RatePer: time.Second}, st.Limits)

		log.waitDistinct(t, 400, 30*time.Second)
		ev := log.snapshot()
		var starts []flowEvent
		for _, x := range ev {
			if x.start {
				starts = append(starts, x)
			}
		}
		require.Len(t, starts, 400, "each message started once")
		// The starts are read by the consumers (FetchedAt), a few ms after
		// Redis granted them and by a varying few under load: a window 50 ms
		// short of the period keeps that jitter from being read as a start
		// too many. On a cluster a fetch's way to its node may add one start
		// (docs/flow-control.md).
		bound := 55
		if e.cl != nil {
			bound++
		}
		assert.LessOrEqual(t, maxInWindow(ev, 950*time.Millisecond), bound, "at most 50 + the burst in any 1 s window")
		took := starts[len(starts)-1].at.Sub(starts[0].at)
		rate := float64(len(starts)-1) / took.Seconds()
		assert.GreaterOrEqual(t, rate, 45.0, "sustained %.1f/s over %v", rate, took)
		assert.Zero(t, retried.Load(), "no attempt counted by the limit")
		procs := map[string]int{}
		for _, x := range starts {
			procs[x.proc]++
		}
		assert.Len(t, procs, 3, "all three consumers took part: %v", procs)
	})
}

// WithGlobalConcurrency(5) with three clients of concurrency 20 never has
// more than 5 handlers running at once across them, and does reach 5.
func TestFlowGlobalConcurrencyHoldsAcrossTheFleet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "conc", topic.FixedTime, 4)
		l := rmq.Limits{Concurrency: 5}
		log := newFlowLog()
		sendBacklog(t, e, tp, "c", 90, noGroup)
		startFlowWorker(t, e, tp, l, 20, "40ms", "", log)
		startFleet(t, e, tp, l, 20, 40*time.Millisecond, log, nil)
		log.waitDistinct(t, 90, 30*time.Second)
		all, _ := maxOverlap(log.snapshot(), func(flowEvent) string { return "" })
		assert.Equal(t, 5, all, "at most 5 at once across the fleet, and 5 reached")
	})
}

// WithGroupConcurrency(1) never runs two messages of one group at once and
// keeps each group's order; messages without a group are not held.
func TestFlowSerialGroupsAcrossTheFleet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "serial", topic.FixedTime, 4)
		l := rmq.Limits{GroupConcurrency: 1}
		log := newFlowLog()
		const groups, per = 6, 12
		sendBacklog(t, e, tp, "g", groups*per, func(i int) string { return fmt.Sprintf("tenant-%d", i%groups) })
		startFlowWorker(t, e, tp, l, 8, "15ms", "", log)
		startFleet(t, e, tp, l, 8, 15*time.Millisecond, log, nil)
		log.waitDistinct(t, groups*per, 30*time.Second)
		ev := log.snapshot()
		_, byGroup := maxOverlap(ev, func(x flowEvent) string { return x.group })
		for g, n := range byGroup {
			assert.Equal(t, 1, n, "group %s ran %d at once", g, n)
		}
		order := map[string][]string{}
		for _, x := range ev {
			if x.start {
				order[x.group] = append(order[x.group], x.id)
			}
		}
		require.Len(t, order, groups)
		for g, ids := range order {
			require.Len(t, ids, per, g)
			for i := 1; i < len(ids); i++ {
				assert.Less(t, ids[i-1], ids[i], "group %s in order: %v", g, ids)
			}
		}
	})
}

// One group with 2,000 queued and ten groups with 5 each: every small
// group finishes before the big group's 100th message.
func TestFlowGroupsAreServedFairly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "fair", topic.FixedTime, 4)
		log := newFlowLog()
		sendBacklog(t, e, tp, "big", 2000, func(int) string { return "big" })
		sendBacklog(t, e, tp, "small", 50, func(i int) string { return fmt.Sprintf("small-%d", i%10) })
		startFleet(t, e, tp, rmq.Limits{}, 8, 0, log, nil)
		startFlowWorker(t, e, tp, rmq.Limits{}, 8, "0s", "", log)
		log.waitDistinct(t, 2050, 60*time.Second)
		bigSeen := 0
		var big100 time.Time
		smallEnd := map[string]time.Time{}
		for _, x := range log.snapshot() {
			switch {
			case x.start && x.group == "big":
				if bigSeen++; bigSeen == 100 {
					big100 = x.at
				}
			case !x.start && x.id[:5] == "small":
				smallEnd[x.id] = x.at
			}
		}
		require.Len(t, smallEnd, 50)
		for id, at := range smallEnd {
			assert.True(t, at.Before(big100), "small %s finished after the big group's 100th started", id)
		}
	})
}

// A group rate holds per group (at most its rate plus the burst in any
// window) while the other groups run at full speed.
func TestFlowGroupRateHoldsPerGroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "grate", topic.FixedTime, 4)
		l := rmq.Limits{GroupRate: 10, GroupRatePer: time.Second}
		log := newFlowLog()
		sendBacklog(t, e, tp, "a", 40, func(int) string { return "slow" })
		sendBacklog(t, e, tp, "b", 40, func(i int) string { return fmt.Sprintf("other-%d", i) })
		startFleet(t, e, tp, l, 8, 0, log, nil)
		startFlowWorker(t, e, tp, l, 8, "0s", "", log)
		log.waitDistinct(t, 80, 30*time.Second)
		var slow, others []flowEvent
		for _, x := range log.snapshot() {
			if !x.start {
				continue
			}
			if x.group == "slow" {
				slow = append(slow, x)
			} else {
				others = append(others, x)
			}
		}
		require.Len(t, slow, 40)
		require.Len(t, others, 40)
		assert.LessOrEqual(t, maxInWindow(slow, time.Second), 11, "the slow group: 10/s plus its burst of 1")
		assert.GreaterOrEqual(t, slow[39].at.Sub(slow[0].at), 3500*time.Millisecond)
		assert.Less(t, others[39].at.Sub(others[0].at), 2*time.Second, "the other groups ran at full speed")
	})
}

// A consumer killed while it holds places of a topic concurrency frees
// them when its leases run out.
func TestFlowKilledConsumerFreesItsPlaces(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "killed", topic.FixedTime, 2)
		l := rmq.Limits{Concurrency: 2}
		log := newFlowLog()
		sendBacklog(t, e, tp, "k", 6, noGroup)
		w := startFlowWorker(t, e, tp, l, 5, "forever", "1s", log)
		log.waitDistinct(t, 2, 15*time.Second)
		c := e.client()
		require.NoError(t, c.Register(tp, log.listener("client", 0, nil), consumer.WithGlobalConcurrency(2), consumer.WithPrepareTimeout(time.Second)))
		e.start(c)
		// The worker holds both places: nothing starts here for longer
		// than the client's prepare timeout (the duration under test).
		require.Never(t, func() bool { return log.distinct() != 2 }, 1500*time.Millisecond, 5*time.Millisecond,
			"the places are the worker's while it lives")
		killed := time.Now()
		w.kill()
		log.waitDistinct(t, 6, 15*time.Second)
		var first time.Time
		for _, x := range log.snapshot() {
			if x.start && x.proc == "client" {
				first = x.at
				break
			}
		}
		assert.True(t, first.After(killed))
		assert.Less(t, first.Sub(killed), 5*time.Second, "freed at the lease deadline (1 s lease, whole seconds)")
	})
}
