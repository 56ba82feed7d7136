package main

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

func TestAckDeletesAWaitingJobAnd204sForUnknownOnes(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	id := e.publish(tok, "ns", "q", "", "a")
	e.publish(tok, "ns", "q", "", "b")
	for _, path := range []string{"/api/ns/q/job/" + id, "/api/ns/q/job/" + id, "/api/ns/q/job/unknown", "/api/ns/never/job/x"} {
		a := do(t, "DELETE", e.url(path), "", "X-Token: "+tok)
		require.Equal(t, http.StatusNoContent, a.status, "%s: %s", path, a)
		require.Empty(t, a.body)
	}
	require.Equal(t, 1, e.size("ns", "q"))
}

func TestDestroyRemovesReadyJobsOnly(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	for range 3 {
		e.publish(tok, "ns", "q", "", "ready")
	}
	delayed := e.publish(tok, "ns", "q", "?delay=3600", "later")
	a := do(t, "DELETE", e.url("/api/ns/q"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	require.Equal(t, 0, e.size("ns", "q"))
	p := e.svc.Pools[names.DefaultPool]
	ws, err := p.Insp.Peek(context.Background(), mustQueueTopic(t, p, "ns", "q"), 10)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, delayed, ws[0].ID)
	// Unknown and empty queues: 204 too; the queue works again at once.
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/none"), "", "X-Token: "+tok).status)
	e.publish(tok, "ns", "q", "", "again")
	require.Equal(t, 1, e.size("ns", "q"))
}

// killJobs lets a consumer of the library fail every job of ns/q once
// (no retries), so they land in the dead letter.
func (e *env) killJobs(ns, q string, n int) {
	e.t.Helper()
	p := e.svc.Pools[names.DefaultPool]
	tp := mustQueueTopic(e.t, p, ns, q)
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix))
	require.NoError(e.t, err)
	var failed atomic.Int64
	require.NoError(e.t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		failed.Add(1)
		return errors.New("boom")
	}), consumer.WithMaxRetries(0), consumer.WithConcurrency(1)))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(e.t, c.Start(ctx))
	require.Eventually(e.t, func() bool {
		n2, err := p.DeadSize(ctx, tp)
		return err == nil && n2 == int64(n)
	}, waitLong, 20*time.Millisecond)
	require.NoError(e.t, c.Close(ctx))
	require.EqualValues(e.t, n, failed.Load())
}

func TestDeadLetter(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	var ids []string
	for _, b := range []string{"a", "b", "c", "d"} {
		ids = append(ids, e.publish(tok, "ns", "q", "", b))
	}
	e.killJobs("ns", "q", 4)

	type deadBody struct {
		Namespace string `json:"namespace"`
		Queue     string `json:"queue"`
		Size      int64  `json:"deadletter_size"`
		Head      string `json:"deadletter_head"`
	}
	peek := func() deadBody {
		t.Helper()
		a := do(t, "GET", e.url("/api/ns/q/deadletter"), "", "X-Token: "+tok)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var d deadBody
		a.json(t, &d)
		return d
	}
	deadSize := func() int64 {
		t.Helper()
		var s api.SizeBody
		do(t, "GET", e.url("/api/ns/q/deadletter/size"), "").json(t, &s)
		return s.Size
	}
	// The order of death, oldest first, as the library's Inspector lists it
	// (newest first); the consumer's acker may not kill them in publish order.
	p := e.svc.Pools[names.DefaultPool]
	dead, err := p.Insp.Dead(context.Background(), mustQueueTopic(t, p, "ns", "q"))
	require.NoError(t, err)
	require.Len(t, dead, 4)
	ids = ids[:0]
	for i := len(dead) - 1; i >= 0; i-- {
		ids = append(ids, dead[i].ID)
	}
	require.Equal(t, deadBody{"ns", "q", 4, ids[0]}, peek(), "the head is the first to die")
	require.EqualValues(t, 4, deadSize())
	require.Equal(t, 0, e.size("ns", "q"))

	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=", "?limit=x", "?ttl=-1", "?ttl=x"} {
		a := do(t, "PUT", e.url("/api/ns/q/deadletter"+q), "", "X-Token: "+tok)
		want := "invalid limit"
		if q[1] == 't' {
			want = "invalid ttl"
		}
		requireError(t, a, http.StatusBadRequest, want)
	}
	requireError(t, do(t, "DELETE", e.url("/api/ns/q/deadletter?limit=0"), "", "X-Token: "+tok), http.StatusBadRequest, "invalid limit")

	// Respawn the two oldest: they join the ready queue in dead-letter order.
	a := do(t, "PUT", e.url("/api/ns/q/deadletter?limit=2&ttl=30"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"respawned","count":2}`, string(a.body))
	require.Equal(t, 2, e.size("ns", "q"))
	require.Equal(t, deadBody{"ns", "q", 2, ids[2]}, peek())
	ws, err := p.ReadyIDs(context.Background(), mustQueueTopic(t, p, "ns", "q"), 10)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.ElementsMatch(t, ids[:2], []string{ws[0].ID, ws[1].ID})

	// Delete one from the head, then the rest with a large limit.
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/deadletter"), "", "X-Token: "+tok).status)
	require.Equal(t, deadBody{"ns", "q", 1, ids[3]}, peek())
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/deadletter?limit=100"), "", "X-Token: "+tok).status)
	require.Equal(t, deadBody{"ns", "q", 0, ""}, peek())
	a = do(t, "PUT", e.url("/api/ns/q/deadletter?limit=10"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"msg":"respawned","count":0}`, string(a.body))

	// Unknown queues: empty answers.
	a = do(t, "GET", e.url("/api/ns/none/deadletter"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"namespace":"ns","queue":"none","deadletter_size":0,"deadletter_head":""}`, string(a.body))
}
