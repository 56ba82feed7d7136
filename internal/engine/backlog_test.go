package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"
)

// backlogEngine is an engine of 32 handlers that adapts a backlog's
// prefetch, as a started one would, without Redis: adaptBacklog and
// giveBack only count.
func backlogEngine(t *testing.T) *Engine {
	t.Helper()
	settings, err := TopicSettings(nil)
	require.NoError(t, err)
	settings.Concurrency = 32
	return &Engine{cfg: newConfig(settings, HubConfig{}), topic: topic.MustNew("backlog", topic.FixedTime, 16), adaptsBacklog: true}
}

// endListeners ends n listener calls (never started, so no handler token
// to give back), with busy deliveries left afterwards.
func endListeners(c *Engine, n, busyAfter int) {
	c.mu.Lock()
	c.busy = busyAfter + n
	c.mu.Unlock()
	for range n {
		c.giveBack(false)
	}
}

// A backlog's prefetch grows while the handlers wait for fetches, stays
// while they keep pace with it, and drops to none once the backlog is over
// or the handlers stall or slow down.
func TestBacklogPrefetchFollowsTheHandlers(t *testing.T) {
	c := backlogEngine(t)
	ms := time.Millisecond

	c.adaptBacklog(32, 32, 32, true, time.Hour)
	require.EqualValues(t, 128, c.prefetch(), "a full fetch for idle handlers: four times the concurrency")

	// The handlers took 100 in 2 ms, none left waiting: half of 128 takes
	// them far less than backlogSpan, so it stays.
	endListeners(c, 100, 32+60)
	c.adaptBacklog(100, 100, 0, true, 2*ms)
	require.EqualValues(t, 128, c.prefetch(), "kept while the handlers keep pace")

	// A handler left with nothing to take: the fetches lag, it grows.
	endListeners(c, 100, 20)
	c.adaptBacklog(128, 128, 0, true, 2*ms)
	require.EqualValues(t, 512, c.prefetch())
	endListeners(c, 400, 0)
	c.adaptBacklog(512, 600, 0, true, 3*ms)
	require.EqualValues(t, 2048, c.prefetch())
	endListeners(c, 1500, 0)
	c.adaptBacklog(512, 1500, 0, true, 10*ms)
	require.EqualValues(t, maxBacklogPrefetch, c.prefetch(), "bounded")

	// A fetch the slots' order cut short keeps it while more is due.
	endListeners(c, 900, 1100)
	c.adaptBacklog(40, 1000, 0, true, 10*ms)
	assert.EqualValues(t, maxBacklogPrefetch, c.prefetch(), "cut short in mid-backlog")

	// Nothing more due: the backlog is over.
	endListeners(c, 900, 1100)
	c.adaptBacklog(300, 1000, 0, false, 10*ms)
	assert.EqualValues(t, 0, c.prefetch(), "backlog over")
}

func TestBacklogPrefetchDropsForStalledOrSlowHandlers(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		done  int
		since time.Duration
	}{
		{"stalled: no listener returned", 0, ms},
		// 10 in 50 ms: half of 128 would take 320 ms, over backlogSpan.
		{"slow", 10, 50 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := backlogEngine(t)
			c.adaptBacklog(32, 32, 32, true, time.Hour)
			require.EqualValues(t, 128, c.prefetch())
			endListeners(c, tc.done, 150)
			c.adaptBacklog(50, 50, 0, true, tc.since)
			assert.EqualValues(t, 0, c.prefetch(), "no hoarding for handlers that do not keep pace")
		})
	}
	t.Run("a fetch moving nothing", func(t *testing.T) {
		c := backlogEngine(t)
		c.adaptBacklog(32, 32, 32, true, time.Hour)
		c.adaptBacklog(0, 100, 32, true, ms)
		assert.EqualValues(t, 0, c.prefetch())
	})
	t.Run("a stream of messages coming due starts none", func(t *testing.T) {
		// The fetch took fewer than it asked for: the handlers are not
		// short of work, whatever is still due by the slots' order.
		c := backlogEngine(t)
		c.adaptBacklog(19, 22, 22, true, ms)
		assert.EqualValues(t, 0, c.prefetch())
	})
	t.Run("busy handlers never grow it from none", func(t *testing.T) {
		c := backlogEngine(t)
		endListeners(c, 5, 20)
		c.adaptBacklog(5, 5, 5, true, ms)
		assert.EqualValues(t, 0, c.prefetch(), "only a few handlers were idle")
	})
}
