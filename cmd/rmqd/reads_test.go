package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// keyspace is every key under the env's prefix with its type and size, and
// the fields of its hashes (the topic definitions among them).
func (e *env) keyspace() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, e.prefix+":*").Result()
	require.NoError(e.t, err)
	out := map[string]string{}
	for _, k := range keys {
		if strings.Contains(k, ":hist:") || strings.Contains(k, ":worker:") || strings.HasSuffix(k, ":workers") {
			// The history and the worker records: written by rmqd's clients
			// on their own clock (every 10 s), whatever the requests.
			continue
		}
		typ, err := e.rdb.Type(ctx, k).Result()
		require.NoError(e.t, err)
		var desc string
		switch typ {
		case "hash":
			fields, err := e.rdb.HKeys(ctx, k).Result()
			require.NoError(e.t, err)
			sort.Strings(fields)
			desc = strings.Join(fields, ",")
		case "zset":
			n, err := e.rdb.ZCard(ctx, k).Result()
			require.NoError(e.t, err)
			desc = fmt.Sprint(n)
		}
		out[k] = typ + " " + desc
	}
	return out
}

// channels lists the pub/sub channels under the env's prefix that have a
// subscriber, with their subscriber counts.
func (e *env) channels() map[string]int64 {
	e.t.Helper()
	ctx := context.Background()
	chans, err := e.rdb.PubSubChannels(ctx, e.prefix+":*").Result()
	require.NoError(e.t, err)
	if len(chans) == 0 {
		return map[string]int64{}
	}
	n, err := e.rdb.PubSubNumSub(ctx, chans...).Result()
	require.NoError(e.t, err)
	return n
}

// Consume, peek and size of queues that do not exist answer as
// lmstfy does and leave Redis's keyspace and rmqd's subscriptions as they
// were: no topic definition, no pull engine, no wake-up subscription.
func TestReadsOfUnknownQueuesWriteNothing(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "known", "", "x")
	e.consumeJob(tok, "/api/ns/known?ttr=30")
	keys, subs := e.keyspace(), e.channels()
	require.NotEmpty(t, subs, "the consumed queue has its engine")

	const n = 1000
	var batch []string
	for i := range n {
		q := fmt.Sprintf("nope%d", i)
		requireNoJob(t, do(t, "GET", e.url("/api/ns/"+q), "", "X-Token: "+tok))
		requireError(t, do(t, "GET", e.url("/api/ns/"+q+"/peek"), "", "X-Token: "+tok), http.StatusNotFound, "the queue is empty")
		a := do(t, "GET", e.url("/api/ns/"+q+"/size"), "")
		require.JSONEq(t, `{"namespace":"ns","queue":"`+q+`","size":0}`, string(a.body))
		if i%100 == 0 {
			requireError(t, do(t, "GET", e.url("/api/ns/"+q+"/job/01M8D5Y29RACPBZV4JN8P7R4C1"), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
			a = do(t, "GET", e.url("/api/ns/"+q+"/deadletter"), "", "X-Token: "+tok)
			require.JSONEq(t, `{"namespace":"ns","queue":"`+q+`","deadletter_size":0,"deadletter_head":""}`, string(a.body))
			// The consume route's laxer rule lets '_' names through; they
			// do not exist either.
			requireNoJob(t, do(t, "GET", e.url("/api/ns/_"+q+"?timeout=1"), "", "X-Token: "+tok))
		}
		batch = append(batch, q)
		if len(batch) == api.MaxConsumeQueues {
			requireNoJob(t, do(t, "GET", e.url("/api/ns/"+strings.Join(batch, ",")+"?count=5"), "", "X-Token: "+tok))
			batch = batch[:0]
		}
	}
	require.Equal(t, keys, e.keyspace(), "a read wrote to Redis")
	require.Equal(t, subs, e.channels(), "a read subscribed")

	many := make([]string, api.MaxConsumeQueues+1)
	for i := range many {
		many[i] = fmt.Sprintf("q%d", i)
	}
	requireError(t, do(t, "GET", e.url("/api/ns/"+strings.Join(many, ",")), "", "X-Token: "+tok), http.StatusBadRequest, "too many queues")
	requireNoJob(t, do(t, "GET", e.url("/api/ns/"+strings.Join(append(many[1:], many[1]), ",")), "", "X-Token: "+tok))
}

// A long poll on a queue that does not exist yet gets the first job
// published to it: through this rmqd at once, through anything else (a Go
// producer here) once the watch's poll sees the queue.
func TestLongPollOnNewQueue(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "old", "?delay=60", "later")
	type result struct {
		j   encode.JobBody
		at  time.Time
		err string
	}
	poll := func(path string) chan result {
		ch := make(chan result, 1)
		go func() {
			a := do(t, "GET", e.url(path), "", "X-Token: "+tok)
			var r result
			r.at = time.Now()
			if a.status != http.StatusOK {
				r.err = a.String()
			} else {
				a.json(t, &r.j)
			}
			ch <- r
		}()
		return ch
	}
	waiting := func() {
		p := e.svc.Pools[names.DefaultPool]
		require.Eventually(t, func() bool { return len(p.Watch.Names()) > 0 }, waitLong, time.Millisecond)
	}

	got := poll("/api/ns/old,fresh?timeout=10")
	waiting()
	sent := time.Now()
	id := e.publish(tok, "ns", "fresh", "", "first")
	r := <-got
	require.Empty(t, r.err)
	require.Equal(t, id, r.j.JobID)
	require.Equal(t, "fresh", r.j.Queue)
	require.Less(t, r.at.Sub(sent), time.Second, "woken by the publish")

	got = poll("/api/ns/other?timeout=10")
	waiting()
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix))
	require.NoError(t, err)
	tp, err := topic.New(names.TopicName("ns", "other"), topic.FixedTime, pull.QueueSlots)
	require.NoError(t, err)
	sent = time.Now()
	_, err = c.Producer().SendFixedTime(context.Background(), tp, []byte("from Go"), time.Now(), producer.WithKey("go-1"))
	require.NoError(t, err)
	r = <-got
	require.Empty(t, r.err)
	require.Equal(t, "go-1", r.j.JobID)
	require.Less(t, r.at.Sub(sent), 2*time.Second, "seen by the watch's poll")
	require.Empty(t, e.svc.Pools[names.DefaultPool].Watch.Names(), "no waiter left")
}

// A long poll that names a queue which exists and one which does not goes
// on pulling the first after the second comes to exist (with nothing ready
// in it yet): a job published to the first then ends the poll.
func TestLongPollKeepsItsQueuesWhenOneAppears(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "old", "?delay=60", "later")
	p := e.svc.Pools[names.DefaultPool]
	got := make(chan answer, 1)
	go func() { got <- do(t, "GET", e.url("/api/ns/old,fresh,third?timeout=10"), "", "X-Token: "+tok) }()
	require.Eventually(t, func() bool { return len(p.Watch.Names()) == 2 }, waitLong, time.Millisecond, "fresh and third watched")
	e.publish(tok, "ns", "fresh", "?delay=60", "not yet")
	require.Eventually(t, func() bool {
		n := p.Watch.Names()
		return len(n) == 1 && n[0] == names.TopicName("ns", "third")
	}, waitLong, time.Millisecond, "the poll goes on with fresh and watches third")
	id := e.publish(tok, "ns", "old", "", "now")
	a := <-got
	require.Equal(t, http.StatusOK, a.status, a.String())
	var j encode.JobBody
	a.json(t, &j)
	require.Equal(t, id, j.JobID)
	require.Equal(t, "old", j.Queue)
}

// The pull engine of a queue nobody consumes is released after PullIdle:
// its wake-up subscription goes; a later consume makes a new one.
func TestIdlePullEnginesReleased(t *testing.T) {
	e := newEnv(t, func(c *service.Config) { c.PullIdle = 300 * time.Millisecond })
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "x")
	// A 1 s lease: the engine stays until it ran out (and could be swept).
	j := e.consumeJob(tok, "/api/ns/q?ttr=1")
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+j.JobID), "", "X-Token: "+tok).status)
	wake := keyspace.KeysFor(e.prefix, mustQueueTopic(t, e.svc.Pools[names.DefaultPool], "ns", "q"), 0).Wake
	require.Equal(t, int64(1), e.channels()[wake])
	require.Eventually(t, func() bool { return e.channels()[wake] == 0 }, waitLong, 20*time.Millisecond)

	got := make(chan answer, 1)
	go func() { got <- do(t, "GET", e.url("/api/ns/q?timeout=10"), "", "X-Token: "+tok) }()
	require.Eventually(t, func() bool { return e.channels()[wake] == 1 }, waitLong, time.Millisecond)
	id := e.publish(tok, "ns", "q", "", "y")
	a := <-got
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Equal(t, id, a.object(t)["job_id"])
}

// A consume that names many queues looks up their definitions with one
// read of the definitions hash, not one per queue; the queues it found are
// remembered, so the next consume of them reads nothing for them.
func TestConsumeOfManyQueuesLooksThemUpInOneRead(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	var hget, hmget atomic.Int64
	defs := keyspace.TopicsKey(e.prefix)
	e.rdb.AddHook(redistest.Observer{Before: func(cmd redis.Cmder) {
		args := cmd.Args()
		if len(args) < 2 || args[1] != defs {
			return
		}
		switch cmd.Name() {
		case "hget":
			hget.Add(1)
		case "hmget":
			hmget.Add(1)
		}
	}})
	// Published through another process: this one has not seen them.
	other := rmqtest.Producer(t, redistest.Client(t, e.srv), e.prefix)
	for _, q := range []string{"a", "b"} {
		_, err := other.SendFixedTime(context.Background(), topic.MustNew(names.TopicName("ns", q), topic.FixedTime, pull.QueueSlots),
			[]byte(q), time.Now().Add(-time.Second), producer.WithKey("job-"+q))
		require.NoError(t, err)
	}
	names := []string{"a"}
	for i := range 30 {
		names = append(names, fmt.Sprintf("none%d", i))
	}
	names = append(names, "b")
	path := "/api/ns/" + strings.Join(names, ",") + "?count=2"
	a := do(t, "GET", e.url(path), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, a.String())
	var jobs []encode.JobBody
	a.json(t, &jobs)
	require.Len(t, jobs, 2)
	assert.Equal(t, []string{"a", "b"}, []string{jobs[0].Queue, jobs[1].Queue})
	// The two HGETs are the pull engines of a and b checking their
	// definitions as they start, once each.
	assert.EqualValues(t, 2, hget.Load(), "no queue's definition read by itself")
	assert.EqualValues(t, 1, hmget.Load(), "one read for 32 queues")

	require.Equal(t, http.StatusNotFound, do(t, "GET", e.url(path), "", "X-Token: "+tok).status)
	assert.EqualValues(t, 2, hget.Load())
	assert.EqualValues(t, 2, hmget.Load(), "the 30 missing ones once more, in one read")
	require.Equal(t, http.StatusNotFound, do(t, "GET", e.url("/api/ns/a,b"), "", "X-Token: "+tok).status)
	assert.EqualValues(t, 2, hget.Load(), "found queues are remembered")
	assert.EqualValues(t, 2, hmget.Load())
}
