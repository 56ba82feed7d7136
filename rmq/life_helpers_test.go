package rmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	ackmux "github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// lifeRig finishes messages of one topic the way the consumers' scripts
// do (fetch.lua, then the ack rounds or rollback.lua with the slot's life
// keys), so the public API's side of a message's life is tested on its
// own: the settings in force are the topic's stored ones.
type lifeRig struct {
	t    *testing.T
	e    *env
	tp   topic.Topic
	c    *rmq.Client // never started: Wait needs no consumers
	insp *rmq.Inspector
	acks *ackmux.Mux
	life rmq.Lifecycle
}

func newLifeRig(t *testing.T, e *env, name string, slotAmount int, l rmq.Lifecycle) *lifeRig {
	t.Helper()
	tp := mustTopic(t, name, topic.FixedTime, slotAmount)
	c := e.client()
	r := &lifeRig{t: t, e: e, tp: tp, c: c, insp: c.Inspector(), acks: ackmux.New(e.rdb, nil), life: l}
	require.NoError(t, r.insp.SetLifecycle(ctxT(t), tp, l))
	return r
}

func (r *lifeRig) slot(id string) int { return slots.IndexString(id, r.tp.SlotAmount()) }

func (r *lifeRig) lk(id string) keyspace.LifeKeys {
	return keyspace.LifeKeysFor(r.e.prefix, r.tp.Name(), r.slot(id))
}

// sendAndFetch sends id, due a second ago (a message due in the fetch's
// own ms is held for its instant, not handed over), and fetches it: its
// delivery token.
func (r *lifeRig) sendAndFetch(id string) int64 {
	r.t.Helper()
	sendAt(r.t, r.c.Producer(), r.tp, id, "body-"+id, time.Now().Add(-time.Second), 0)
	_, token := fetchOne(r.t, r.e, r.tp, r.slot(id), id)
	return token
}

// complete acks a delivery with result through the ack rounds.
func (r *lifeRig) complete(id string, token int64, result string) {
	r.t.Helper()
	k := r.e.keys(r.tp, r.slot(id))
	req := &ackmux.Req{Keys: ackmux.SlotKeys(k, true), ID: id, Token: token, Bound: 5 * time.Second,
		Life: r.lk(id).Slice(), HasLife: true, Retention: r.life.Retention.Milliseconds(),
		Events: int64(r.life.Events), Result: []byte(result)}
	require.NoError(r.t, r.acks.Do(context.Background(), req))
	require.Equal(r.t, int64(ackmux.Done), req.Code, "ack of %s", id)
}

// kill ends a delivery as failed, to the dead queue, with errText.
func (r *lifeRig) kill(id string, token int64, errText string) {
	r.t.Helper()
	k := r.e.keys(r.tp, r.slot(id))
	lk := r.lk(id).Slice()
	keys := append([]string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Store}, lk[:]...)
	res, err := scripts.Rollback.Run(context.Background(), r.e.rdb, keys, scripts.WakeCommand(r.e.rdb), "0L", 0, 0, 1, 0,
		r.life.Events, id, token, errText, "d").Int64Slice()
	require.NoError(r.t, err)
	require.Equal(r.t, []int64{3}, res, "rollback of %s to dead", id)
}

// waitResult is what a Wait in a goroutine returned.
type waitResult struct {
	m   rmq.MessageInfo
	err error
}

// goWait starts a Wait for id and returns once it is registered in Redis
// (the slot's waiters hash counts it), so what finishes id next is what
// it must hear of.
func (r *lifeRig) goWait(ctx context.Context, id string) <-chan waitResult {
	r.t.Helper()
	before, _ := r.e.rdb.HGet(context.Background(), r.lk(id).Waiters, id).Int()
	out := make(chan waitResult, 1)
	go func() {
		m, err := r.c.Wait(ctx, r.tp, id)
		out <- waitResult{m, err}
	}()
	r.waitRegistered(id, before+1)
	return out
}

// waitRegistered waits until n Wait calls are registered for id.
func (r *lifeRig) waitRegistered(id string, n int) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		got, err := r.e.rdb.HGet(context.Background(), r.lk(id).Waiters, id).Int()
		return (err == nil || err == redis.Nil) && got >= n
	}, waitLong, 5*time.Millisecond, "wait for %s never registered", id)
}

func recv(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLong):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}
