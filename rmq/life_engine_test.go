package rmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The consumer's part in a message's life after hand-off: results stored
// with the ack, progress on the in-flight message, events, and a cancel
// that reaches a running handler.

// lifeKeys are the life keys of the slot id is in.
func (e *env) lifeKeys(tp topic.Topic, id string) keyspace.LifeKeys {
	return keyspace.LifeKeysFor(e.prefix, tp.Name(), slotOfKey(tp, id))
}

// record reads the retained record of id, false when there is none.
func (e *env) record(tp topic.Topic, id string) (life.Record, bool) {
	e.t.Helper()
	raw, err := e.rdb.HGet(context.Background(), e.lifeKeys(tp, id).Done, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return life.Record{}, false
	}
	require.NoError(e.t, err)
	r, err := life.DecodeRecord(raw)
	require.NoError(e.t, err)
	return r, true
}

// lifeEvents returns the types and ids of the events logged in id's slot
// from the delivery on: without "sent", which the tests of sends check.
func (e *env) lifeEvents(tp topic.Topic, id string) []string {
	e.t.Helper()
	xs, err := e.rdb.XRange(context.Background(), e.lifeKeys(tp, id).Events, "-", "+").Result()
	require.NoError(e.t, err)
	var out []string
	for _, x := range xs {
		if typ := x.Values["t"].(string); typ != "sent" {
			out = append(out, typ+" "+x.Values["id"].(string))
		}
	}
	return out
}

// outcomeOf waits for the next outcome.
func outcomeOf(t *testing.T, outcomes <-chan consumer.Outcome) consumer.Outcome {
	t.Helper()
	select {
	case o := <-outcomes:
		return o
	case <-time.After(waitLong):
		t.Fatal("no delivery ended")
		return 0
	}
}

// A handler's result is stored with its ack: a retaining topic keeps the
// message's record, completed, with the result.
func TestLifeResultStoredWithAck(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "liferesult", topic.Priority, 4)
	outcomes := make(chan consumer.Outcome, 4)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return m.SetResult([]byte("result of " + string(m.Body)))
	}), consumer.WithRetention(time.Minute)))
	e.start(c)
	_, err := c.Producer().SendPriority(ctx, tp, []byte("job"), 100, producer.WithKey("r1"))
	require.NoError(t, err)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	r, ok := e.record(tp, "r1")
	require.True(t, ok, "a retaining topic keeps the completed message")
	assert.Equal(t, life.RecordCompleted, r.State)
	assert.Equal(t, "result of job", string(r.Result))
}

// Progress is stored on the in-flight message for its delivery and goes
// when the delivery ends; a context that is not a handler's refuses it,
// and so does a result or a progress too large.
func TestLifeProgressStoredAndCleared(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeprogress", topic.Priority, 4)
	outcomes := make(chan consumer.Outcome, 4)
	reported := make(chan int64, 1)
	release := make(chan struct{})
	tooLarge := make(chan error, 1)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		tooLarge <- m.SetProgress(ctx, make([]byte, consumer.MaxProgressSize+1))
		if err := m.SetProgress(ctx, []byte("half")); err != nil {
			return err
		}
		reported <- m.Token
		<-release
		return nil
	})))
	e.start(c)
	_, err := c.Producer().SendPriority(ctx, tp, []byte("job"), 100, producer.WithKey("p1"))
	require.NoError(t, err)
	var token int64
	select {
	case token = <-reported:
	case <-time.After(waitLong):
		t.Fatal("the handler did not report progress")
	}
	require.ErrorIs(t, <-tooLarge, consumer.ErrProgressTooLarge)
	raw, err := e.rdb.HGet(ctx, e.lifeKeys(tp, "p1").Progress, "p1").Result()
	require.NoError(t, err)
	p, ok := life.Progress(raw, token)
	require.True(t, ok)
	assert.Equal(t, "half", string(p))
	close(release)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	n, err := e.rdb.HExists(ctx, e.lifeKeys(tp, "p1").Progress, "p1").Result()
	require.NoError(t, err)
	assert.False(t, n, "the ack clears the delivery's progress")

	m := &consumer.Message{ID: "p1", Topic: tp.Name(), Token: token}
	require.ErrorIs(t, m.SetProgress(ctx, []byte("x")), consumer.ErrNotCurrent)
	require.ErrorIs(t, m.SetResult(make([]byte, consumer.MaxResultSize+1)), consumer.ErrResultTooLarge)
	require.NoError(t, m.SetResult(make([]byte, consumer.MaxResultSize)))
}

// A running delivery cancelled (cancel.lua) has its handler's context
// cancelled with life.ErrCancelled at once (not after a lease extension
// found it gone: the lease here is long), and ends Cancelled: no ack, no
// rollback, no retry; a retaining topic keeps it as cancelled.
func TestLifeCancelRunningHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifecancel", topic.Priority, 4)
		outcomes := make(chan consumer.Outcome, 4)
		running := make(chan int64, 1)
		cause := make(chan error, 1)
		c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			running <- m.Token
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}), consumer.WithRetention(time.Minute), consumer.WithEvents(100), consumer.WithPrepareTimeout(time.Minute), consumer.WithRetryBackoff(noBackoff)))
		e.start(c)
		_, err := c.Producer().SendPriority(ctx, tp, []byte("job"), 100, producer.WithKey("c1"))
		require.NoError(t, err)
		select {
		case <-running:
		case <-time.After(waitLong):
			t.Fatal("not delivered")
		}
		k, lk := e.keys(tp, slotOfKey(tp, "c1")), e.lifeKeys(tp, "c1")
		keys := append([]string{k.Store, k.Prepare, k.Msg, k.Delayed, k.Wake}, lk.Done, lk.DoneQ, lk.Events, lk.Waiters, lk.Finish, lk.Progress)
		n, err := scripts.Cancel.Run(ctx, e.rdb, keys, "c1", scripts.WakeCommand(e.rdb), time.Minute.Milliseconds(), 100).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(4), n, "cancelled in flight")
		select {
		case err := <-cause:
			require.ErrorIs(t, err, life.ErrCancelled)
		case <-time.After(5 * time.Second):
			t.Fatal("the handler's context was not cancelled promptly")
		}
		require.Equal(t, consumer.Cancelled, outcomeOf(t, outcomes))
		r, ok := e.record(tp, "c1")
		require.True(t, ok)
		assert.Equal(t, life.RecordCancelled, r.State)
		assert.Equal(t, []string{"delivered c1", "cancelled c1"}, e.lifeEvents(tp, "c1"), "neither retried nor completed")
		select {
		case <-running:
			t.Fatal("a cancelled message was delivered again")
		default:
		}
	})
}

// With an event log, each delivery records "delivered", an ack
// "completed", and a failing handler "retried" then "dead".
func TestLifeEventsOfAcksAndRollbacks(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeevents", topic.Priority, 1)
	outcomes := make(chan consumer.Outcome, 8)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if string(m.Body) == "fail" {
			return errors.New("boom")
		}
		return nil
	}), consumer.WithEvents(100), consumer.WithMaxRetries(1), consumer.WithRetryBackoff(noBackoff)))
	e.start(c)
	_, err := c.Producer().SendPriority(ctx, tp, []byte("ok"), 100, producer.WithKey("e1"))
	require.NoError(t, err)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	_, err = c.Producer().SendPriority(ctx, tp, []byte("fail"), 100, producer.WithKey("e2"))
	require.NoError(t, err)
	require.Equal(t, consumer.Retried, outcomeOf(t, outcomes))
	require.Equal(t, consumer.Dead, outcomeOf(t, outcomes))
	assert.Equal(t, []string{"delivered e1", "completed e1", "delivered e2", "retried e2", "delivered e2", "dead e2"}, e.lifeEvents(tp, "e1"))
	_, kept := e.record(tp, "e1")
	assert.False(t, kept, "no retention: no record")
}

// The settings stored with the topic win over the consumer's options (a
// warning says so), and a change told on the wake channels ("L") applies
// from the next fetch.
func TestLifeStoredSettingsWin(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifestored", topic.Priority, 1)
	require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Events: 10}))
	outcomes := make(chan consumer.Outcome, 4)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return m.SetResult(m.Body)
	}), consumer.WithRetention(time.Minute)))
	e.start(c)
	assert.Contains(t, e.log.String(), "lifecycle options differ")
	_, err := c.Producer().SendPriority(ctx, tp, []byte("one"), 100, producer.WithKey("s1"))
	require.NoError(t, err)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	_, kept := e.record(tp, "s1")
	assert.False(t, kept, "the stored settings keep no record")
	assert.Equal(t, []string{"delivered s1", "completed s1"}, e.lifeEvents(tp, "s1"))

	// The settings change: retention on, told on the slot's channel
	// before the next send, so its fetch reads them first.
	require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Retention: time.Minute, Events: 10}))
	require.NoError(t, e.rdb.Publish(ctx, e.keys(tp, 0).Wake, "L").Err())
	_, err = c.Producer().SendPriority(ctx, tp, []byte("two"), 100, producer.WithKey("s2"))
	require.NoError(t, err)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	r, kept := e.record(tp, "s2")
	require.True(t, kept, "the changed settings apply")
	assert.Equal(t, "two", string(r.Result))
}

// Lifecycle options out of bounds are refused like any other.
func TestLifeOptionsValidated(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lifebad", topic.Priority, 1)
	c := e.client()
	for _, o := range []consumer.Option{consumer.WithRetention(-time.Second), consumer.WithRetention(time.Microsecond), consumer.WithRetention(31 * 24 * time.Hour), consumer.WithEvents(-1)} {
		require.ErrorIs(t, c.Register(tp, consumer.ListenerFunc(ack), o), consumer.ErrInvalidOption)
	}
}

// A pulled delivery's ack and an ack by id are life groups too: under the
// topic's stored settings the pulled result is kept and both are logged.
func TestLifePulledAndByIDAcks(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifepull", topic.Priority, 1)
	require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Retention: time.Minute, Events: 10}))
	c := e.client()
	e.start(c)
	for _, id := range []string{"q1", "q2"} {
		_, err := c.Producer().SendPriority(ctx, tp, []byte(id), 100, producer.WithKey(id))
		require.NoError(t, err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{tp}, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	first := ds[0].ID
	require.NoError(t, ds[0].SetResult([]byte("pulled")))
	require.NoError(t, ds[0].Ack(ctx))
	ds, err = c.Pull(ctx, []topic.Topic{tp}, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	second := ds[0].ID
	ok, err := c.AckByID(ctx, tp, second)
	require.NoError(t, err)
	require.True(t, ok)
	r, kept := e.record(tp, first)
	require.True(t, kept)
	assert.Equal(t, "pulled", string(r.Result))
	r, kept = e.record(tp, second)
	require.True(t, kept)
	assert.Empty(t, r.Result)
	assert.Equal(t, []string{"delivered " + first, "completed " + first, "delivered " + second, "completed " + second}, e.lifeEvents(tp, first))
}
