package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ackmux "github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// completeJob acks the consumed job id of ns/q with result the way a
// consumer that sets a result does (the ack rounds with the slot's life
// keys): rmqd's own ack (DELETE) carries no result.
func (e *env) completeJob(ns, q, id, result string, l rmq.Lifecycle) {
	e.t.Helper()
	ctx := context.Background()
	tp, found, err := e.svc.Pools[names.DefaultPool].QueueTopic(ctx, ns, q)
	require.NoError(e.t, err)
	require.True(e.t, found)
	k := keyspace.KeysFor(e.prefix, tp, 0)
	score, err := e.rdb.ZScore(ctx, k.Prepare, id).Result()
	require.NoError(e.t, err, "%s is in flight", id)
	_, token := scripts.SplitPrepareScore(score)
	req := &ackmux.Req{Keys: ackmux.SlotKeys(k, true), ID: id, Token: token, Bound: 5 * time.Second,
		Life: keyspace.LifeKeysFor(e.prefix, tp.Name(), 0).Slice(), HasLife: true,
		Retention: l.Retention.Milliseconds(), Events: int64(l.Events), Result: []byte(result)}
	require.NoError(e.t, ackmux.New(e.rdb, nil).Do(ctx, req))
	require.Equal(e.t, int64(ackmux.Done), req.Code)
}

// A wait on a job in flight answers when it completes: state completed
// with its result (base64, as data); a queue that retains it answers the
// same by id afterwards, and its event log has the completed event with
// the result. Without retention the wait still gets the result, the job's
// data being gone (null).
func TestWaitCompletedJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	l := rmq.Lifecycle{Retention: time.Minute, Events: 100}
	id := e.publish(tok, "ns", "q", "", "body")
	e.setLifecycle("ns", "q", l)
	require.Equal(t, id, e.consumeID(tok, "ns", "q"))
	s, _ := e.openEvents("/api/ns/q/events?after=0", hdr)

	waited := make(chan answer, 1)
	go func() { waited <- do(t, "GET", e.url("/api/ns/q/job/"+id+"/wait?timeout=60"), "", hdr) }()
	e.completeJob("ns", "q", id, "done: 3 thumbnails", l)
	m := lifeJSON(t, <-waited)
	require.Equal(t, "completed", m["state"])
	require.Equal(t, b64("done: 3 thumbnails"), m["result"])
	require.Equal(t, b64("body"), m["data"])
	require.NotEmpty(t, m["finished_at"])
	m = lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr))
	require.Equal(t, "completed", m["state"])
	require.Equal(t, b64("done: 3 thumbnails"), m["result"])
	f := s.nextEvent("completed")
	require.Contains(t, f.data, `"data":"`+b64("done: 3 thumbnails")+`"`)
	require.Contains(t, f.data, `"job_id":"`+id+`"`)

	// No retention: the waiter is told with the result; by id it is gone.
	e.setLifecycle("ns", "q", rmq.Lifecycle{})
	other := e.publish(tok, "ns", "q", "", "other")
	require.Equal(t, other, e.consumeID(tok, "ns", "q"))
	go func() { waited <- do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait?timeout=60"), "", hdr) }()
	// The wait must be registered before the job ends, or it finds the
	// job gone (404): it is, once the slot's waiters hash has it.
	lk := keyspace.LifeKeysFor(e.prefix, names.TopicName("ns", "q"), 0)
	require.Eventually(t, func() bool {
		n, err := e.rdb.HExists(context.Background(), lk.Waiters, other).Result()
		return err == nil && n
	}, waitLong, 5*time.Millisecond)
	e.completeJob("ns", "q", other, "r2", rmq.Lifecycle{})
	a := <-waited
	m = lifeJSON(t, a)
	require.Equal(t, "completed", m["state"])
	require.Equal(t, b64("r2"), m["result"])
	require.Nil(t, m["data"], "%s", a.body)
	requireError(t, do(t, "GET", e.url("/api/ns/q/job/"+other), "", hdr), http.StatusNotFound, "job not found")
}
