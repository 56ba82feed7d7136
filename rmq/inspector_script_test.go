package rmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// requeue.lua run twice for one call (go-redis resends a script whose reply
// was lost) recognises its own work: the second run changes nothing and
// still reports the message as requeued. Another call finds nothing.
func TestRequeueScriptRunTwice(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "twice", topic.Priority, 1)
	e.fakeDead(tp, 0, []string{"a"}, func(int) float64 { return float64(time.Now().UnixMilli()) })
	k := e.keys(tp, 0)
	keys := []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake}
	run := func(nonce string, ids ...any) []int64 {
		res, err := scripts.Requeue.Run(ctx, e.rdb, keys, append([]any{"PUBLISH", nonce, 0, 0}, ids...)...).Int64Slice()
		require.NoError(t, err)
		return res
	}
	assert.Equal(t, []int64{1}, run("77", "a"))
	after := e.dump()
	assert.Equal(t, []int64{5}, run("77", "a"), "the rerun knows itself")
	assert.Equal(t, after, e.dump(), "the rerun wrote something")
	assert.Equal(t, []int64{0}, run("78", "a"), "another call finds nothing dead")
	assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))

	// A dead entry without its body is dropped; an unreadable one is left.
	require.NoError(t, e.rdb.ZAdd(ctx, k.Dead, redis.Z{Score: 1, Member: "bodiless"}).Err())
	require.NoError(t, e.rdb.ZAdd(ctx, k.Dead, redis.Z{Score: 1, Member: "garbled"}).Err())
	require.NoError(t, e.rdb.HSet(ctx, k.DeadMsg, "garbled", "not an envelope").Err())
	assert.Equal(t, []int64{6, 7}, run("79", "bodiless", "garbled"))
	_, ok := e.zscore(k.Dead, "bodiless")
	assert.False(t, ok)
	_, ok = e.zscore(k.Dead, "garbled")
	assert.True(t, ok, "an unreadable message must not be dropped")
	insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	n, err := insp.RequeueAll(ctx, tp)
	require.NoError(t, err, "RequeueAll must end though one entry cannot move")
	assert.Zero(t, n)
	n, err = insp.DeleteDead(ctx, tp, "garbled")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))
}

// A reply lost after Redis ran the requeue: go-redis runs the script again
// on a new connection, and the caller still sees one message requeued, which
// is stored once.
func TestRequeueSurvivesLostReply(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	proxy, err := faultproxy.Start(e.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })

	tp := mustTopic(t, "lost", topic.FixedTime, 1)
	e.makeDead(tp, "a", "warm-up")
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(e.prefix))
	n, err := insp.Requeue(ctx, tp, "warm-up") // loads the script
	require.NoError(t, err)
	require.Equal(t, 1, n)

	proxy.DropReplyTo([]byte(scripts.Requeue.Hash()))
	n, err = insp.Requeue(ctx, tp, "a")
	require.NoError(t, err)
	assert.EqualValues(t, 1, proxy.Dropped(), "the fault happened")
	assert.Equal(t, 1, n, "the rerun reports what the first run did")
	assert.Equal(t, counts{Store: 2, Msg: 2}, e.counts(tp))
}

// deletedead.lua: deleting twice deletes once; purging unlinks both keys.
func TestDeleteDeadScript(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "del", topic.FixedTime, 1)
	e.fakeDead(tp, 0, []string{"a", "b", "c"}, func(j int) float64 { return float64(1000 + j) })
	k := e.keys(tp, 0)
	run := func(args ...any) int64 {
		n, err := scripts.DeleteDead.Run(ctx, e.rdb, []string{k.Dead, k.DeadMsg}, args...).Int64()
		require.NoError(t, err)
		return n
	}
	assert.EqualValues(t, 1, run("ids", "a", "zzz"))
	assert.EqualValues(t, 0, run("ids", "a"))
	assert.EqualValues(t, 2, run("all"))
	assert.EqualValues(t, 0, run("all"))
	assert.Equal(t, counts{}, e.counts(tp))
	redistest.CheckNoLeftoverKeys(t, e.rdb, e.prefix+":{")
}

// Requeue waits for nothing: a consumer sleeping on a far-future head is
// woken by the requeue's notification and handles the message at once.
func TestRequeueWakesSleepingConsumer(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "wake", topic.FixedTime, 1)
	e.makeDead(tp, "a")
	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	sendAt(t, c.Producer(), tp, "far", "far", time.Now().Add(time.Hour), 0)
	e.waitFetchersAsleep(1) // asleep until "far", an hour away
	start := time.Now()
	n, err := c.Inspector().Requeue(ctx, tp, "a")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "a", d.ID)
	assert.Less(t, time.Since(start), 2*time.Second, "the requeued message waited for a poll")
	removed, err := c.Producer().Remove(context.Background(), tp, "far")
	require.NoError(t, err)
	assert.NotZero(t, removed)
}
