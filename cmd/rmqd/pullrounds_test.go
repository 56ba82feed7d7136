package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
)

// Consumes that share rounds get disjoint jobs, each at most its count,
// every job exactly once; with more asked than ready, all that is ready is
// dealt out and the rest get what is left (nothing, at the end).
func TestPullRoundsDealJobsOut(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	const ready = 60
	want := map[string]bool{}
	for range ready {
		want[e.publish(tok, "ns", "q", "", "x")] = true
	}
	want[e.publish(tok, "ns", "other", "", "y")] = true
	p := e.svc.Pools[names.DefaultPool]
	q := mustQueueTopic(t, p, "ns", "q")
	other := mustQueueTopic(t, p, "ns", "other")

	ctx := context.Background()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1 + i%3 // 80 asked in all, 60 ready
			topics := []topic.Topic{q}
			lease := 30 * time.Second
			if i%7 == 0 {
				topics = []topic.Topic{other, q} // another key: its own Pull
			}
			if i%5 == 0 {
				lease = 20 * time.Second
			}
			jobs, err := p.Rounds.Pull(ctx, topics, n, lease, false)
			require.NoError(t, err)
			require.LessOrEqual(t, len(jobs), n)
			mu.Lock()
			for _, j := range jobs {
				got[j.ID]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Len(t, got, ready+1, "every ready job handed out")
	for id, n := range got {
		require.True(t, want[id], "job %s was never published", id)
		require.Equal(t, 1, n, "job %s handed out %d times", id, n)
	}
	jobs, err := p.Rounds.Pull(ctx, []topic.Topic{q}, 5, time.Second, false)
	require.NoError(t, err)
	require.Empty(t, jobs)
}

// A consume that may wait skips the round while its queue was found
// drained a moment ago (its long poll fetches first anyway), and rides
// rounds again after drainedFor.
func TestPullRoundsSkippedForLongPollsOfDrainedQueues(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "x")
	p := e.svc.Pools[names.DefaultPool]
	q := mustQueueTopic(t, p, "ns", "q")
	ctx := context.Background()
	jobs, err := p.Rounds.Pull(ctx, []topic.Topic{q}, 2, time.Minute, true)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "short: drained")
	e.publish(tok, "ns", "q", "", "y")
	jobs, err = p.Rounds.Pull(ctx, []topic.Topic{q}, 1, time.Minute, true)
	require.NoError(t, err)
	require.Empty(t, jobs, "skipped: the queue was drained a moment ago")
	jobs, err = p.Rounds.Pull(ctx, []topic.Topic{q}, 1, time.Minute, false)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "a consume that does not wait always rides a round")
	drainStart := time.Now()
	jobs, err = p.Rounds.Pull(ctx, []topic.Topic{q}, 1, time.Minute, false)
	require.NoError(t, err)
	require.Empty(t, jobs, "drained again")
	drainEnd := time.Now()
	e.publish(tok, "ns", "q", "", "z")
	jobs, err = p.Rounds.Pull(ctx, []topic.Topic{q}, 1, time.Minute, true)
	require.NoError(t, err)
	require.Empty(t, jobs, "skipped")
	// Long polls skip rounds until drainedFor passed since the queue was
	// found drained, and then ride one again.
	redistest.Poll(t, func() error {
		start := time.Now()
		jobs, err := p.Rounds.Pull(ctx, []topic.Topic{q}, 1, time.Minute, true)
		require.NoError(t, err)
		if len(jobs) == 1 {
			require.GreaterOrEqual(t, time.Since(drainStart), pull.DrainedFor, "a round ridden before drainedFor")
			return nil
		}
		require.Less(t, start.Sub(drainEnd), pull.DrainedFor, "after drainedFor a long poll rides a round again")
		return errors.New("skipped")
	})
}
