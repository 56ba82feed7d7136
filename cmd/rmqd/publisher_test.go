package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
)

// Publishes that arrive while a write is in flight ride the next write
// together, and each still gets its own outcome: its own id, its own
// options, its own error.
func TestPublisherSharesWritesAndReportsEachJob(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	var calls atomic.Int64
	release := make(chan struct{})
	var first sync.Once
	rdb.AddHook(redistest.Observer{Before: func(cmd redis.Cmder) {
		args := cmd.Args()
		if len(args) > 1 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && args[1] == scripts.SendBatch.Hash() {
			calls.Add(1)
			// The first write waits until every other publish queued.
			first.Do(func() { <-release })
		}
	}})
	prod := rmqtest.Producer(t, rdb, redistest.Prefix(t))
	pub := pull.NewPublisher(prod)
	ctx := context.Background()
	qa := topic.MustNew("ns.a", topic.FixedTime, 1)
	qb := topic.MustNew("ns.b", topic.FixedTime, 1)

	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	publish := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp, at := qa, time.Now()
			if i%2 == 1 {
				tp = qb
			}
			if i%10 == 9 {
				at = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) // refused by the library
			}
			j := pull.JobSpec{ID: fmt.Sprintf("job-%02d", i), Body: []byte(fmt.Sprint(i)), Due: at, Tries: 1 + i%5}
			errs[i] = pub.Publish(ctx, tp, j.Message())
		}()
	}
	// The first publish goes alone and its write waits in the hook; every
	// other one then queues behind it.
	publish(0)
	require.Eventually(t, func() bool { return calls.Load() == 1 }, waitLong, time.Millisecond, "the first write started")
	for i := 1; i < n; i++ {
		publish(i)
	}
	require.Eventually(t, func() bool { return pub.Queued() == n-1 }, waitLong, time.Millisecond, "the other publishes queued")
	close(release)
	wg.Wait()
	assert.LessOrEqual(t, calls.Load(), int64(3), "%d publishes shared writes", n)

	insp := func(tp topic.Topic, id string) (producer.Removed, error) { return prod.Remove(ctx, tp, id) }
	for i := range n {
		tp := qa
		if i%2 == 1 {
			tp = qb
		}
		id := fmt.Sprintf("job-%02d", i)
		if i%10 == 9 {
			require.True(t, errors.Is(errs[i], producer.ErrInvalidTime), "%s: %v", id, errs[i])
			r, err := insp(tp, id)
			require.NoError(t, err)
			require.Equal(t, producer.NotFound, r, "%s was refused: nothing written", id)
			continue
		}
		require.NoError(t, errs[i], id)
		r, err := insp(tp, id)
		require.NoError(t, err)
		require.Equal(t, producer.RemovedWaiting, r, "%s stored in its own queue", id)
	}
}

// Concurrent publishes over HTTP, to two queues with different options,
// each get their own 201 and job id, and each job keeps its own tries.
func TestConcurrentPublishesEachGetTheirOwnAnswer(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	const n = 48
	type result struct {
		status int
		id     string
		body   string
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := []string{"qa", "qb"}[i%2]
			query := fmt.Sprintf("?tries=%d", 1+i%4)
			if i%8 == 7 {
				query = "?at=1960-01-01T00:00:00Z"
			}
			req, _ := http.NewRequest("PUT", e.url("/api/ns/"+q+query), strings.NewReader(fmt.Sprint(i)))
			req.Header.Set("X-Token", tok)
			resp, err := http.DefaultClient.Do(req)
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			var m map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&m)
			res[i] = result{resp.StatusCode, m["job_id"], m["error"]}
		}()
	}
	wg.Wait()
	ids := map[string]int{}
	for i, r := range res {
		if i%8 == 7 {
			require.Equal(t, http.StatusBadRequest, r.status, "%d: %+v", i, r)
			require.Equal(t, params.ErrAtTooEarly, r.body)
			continue
		}
		require.Equal(t, http.StatusCreated, r.status, "%d: %+v", i, r)
		require.Len(t, r.id, 26)
		_, dup := ids[r.id]
		require.False(t, dup, "job id %s answered twice", r.id)
		ids[r.id] = i
	}
	require.Equal(t, n-n/8, len(ids))
	// The refused ones (i%8 == 7) were all for qb.
	require.Equal(t, n/2, e.size("ns", "qa"))
	require.Equal(t, n/2-n/8, e.size("ns", "qb"))
	// Each job kept its own body and tries: remain_tries = tries-1.
	for range len(ids) {
		a := do(t, "GET", e.url("/api/ns/qa,qb"), "", "X-Token: "+tok)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		m := a.object(t)
		i, ok := ids[m["job_id"].(string)]
		require.True(t, ok, "unknown job %v", m["job_id"])
		require.Equal(t, []string{"qa", "qb"}[i%2], m["queue"])
		require.Equal(t, float64(i%4), m["remain_tries"], "job %d", i)
		delete(ids, m["job_id"].(string))
	}
	require.Empty(t, ids)
}
