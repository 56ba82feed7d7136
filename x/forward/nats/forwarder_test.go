package rmqnats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	rmqnats "github.com/rmq-go/rmq/x/forward/nats"
)

// 10,000 messages due within three seconds all reach the stream, each
// once, none before its due time, with body, headers, rmq-* headers and
// Nats-Msg-Id.
func TestForwardTenThousand(t *testing.T) {
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("orders")
	s := b.stream(t, "ORDERS", subjectOf(&consumer.Message{Topic: tp.Name()}))
	live := b.collect(t, "fw.>")

	const n = 10_000
	sent := e.SendDue(tp, n, time.Now().Add(2*time.Second), 3*time.Second)
	fw := rmqnats.Forwarder(b.js, subjectOf)
	closeForwarder(t, fw)
	e.Forward(tp, fw, consumer.WithConcurrency(256))

	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded and acked", func() bool {
		return live.len() >= n && e.Unacked(tp) == 0
	})
	sent.Check(t, tp, live.received(), false)
	stored := storedMsgs(t, s)
	require.Len(t, stored, n)
	sent.Check(t, tp, stored, false) // the store time is not before due either
	assert.Zero(t, e.Stats(tp).Dead)
}

// A subject no stream captures: the publish fails with JetStream's "no
// response from stream", retried like any error, and the message ends in
// the dead queue with that error once its retries are spent.
func TestNoStreamEndsDead(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("nostream")
	fw := forwardtest.NewRecorder(rmqnats.Forwarder(b.js, subjectOf))
	closeForwarder(t, fw.L)
	_, err := rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey("lost"))
	require.NoError(t, err)
	e.Forward(tp, fw, consumer.WithMaxRetries(1), consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond }))

	forwardtest.Eventually(t, forwardtest.WaitLong, "message dead", func() bool { return e.Stats(tp).Dead == 1 })
	dead := e.Dead(tp)
	require.Len(t, dead, 1)
	assert.Equal(t, "lost", dead[0].ID)
	assert.Contains(t, dead[0].LastError, "nats: no response from stream")
	assert.Contains(t, dead[0].LastError, "fw."+tp.Name())
	calls := fw.Calls()
	require.Len(t, calls, 2, "one attempt and one retry")
	for _, c := range calls {
		assert.ErrorIs(t, c.Err, jetstream.ErrNoStreamResponse)
	}
}

// What no retry can send goes to the dead queue on the first attempt:
// an empty subject, a header NATS cannot carry.
func TestUnsendableDeadAtOnce(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("unsendable")
	b.stream(t, "UNSENDABLE", "fw.>")
	fw := forwardtest.NewRecorder(rmqnats.Forwarder(b.js, func(m *consumer.Message) string {
		if m.ID == "no-subject" {
			return ""
		}
		return subjectOf(m)
	}))
	closeForwarder(t, fw.L)
	p := rmqtest.Producer(t, e.RDB, e.Prefix)
	ctx := context.Background()
	_, err := p.SendFixedTime(ctx, tp, []byte("a"), time.Now(), producer.WithKey("no-subject"))
	require.NoError(t, err)
	_, err = p.SendFixedTime(ctx, tp, []byte("b"), time.Now(), producer.WithKey("bad-header"),
		producer.WithHeaders(map[string]string{"x": "line\r\nbreak"}))
	require.NoError(t, err)
	e.Forward(tp, fw)

	forwardtest.Eventually(t, forwardtest.WaitLong, "both dead", func() bool { return e.Stats(tp).Dead == 2 })
	byID := map[string]string{}
	for _, d := range e.Dead(tp) {
		byID[d.ID] = d.LastError
	}
	assert.Contains(t, byID["no-subject"], `invalid subject ""`)
	assert.Contains(t, byID["bad-header"], "header NATS cannot carry")
	assert.Len(t, fw.Calls(), 2, "no retries")
}

// A forwarder killed after JetStream's PubAck and before RMQ's ack: the
// message is delivered again once the lease runs out, published again with
// the same Nats-Msg-Id, and JetStream keeps one copy.
func TestKilledBetweenConfirmAndAck(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("killed")
	s := b.stream(t, "KILLED", subjectOf(&consumer.Message{Topic: tp.Name()}))
	_, err := rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, forwardtest.Body(1), time.Now(),
		producer.WithKey("job-1"), producer.WithHeaders(forwardtest.Headers(1)))
	require.NoError(t, err)

	w := e.StartWorker(tp, b.srv.URL())
	require.Equal(t, "job-1", w.Confirmed(t, forwardtest.WaitLong))
	require.EqualValues(t, 1, streamCount(t, s), "the worker's publish is in the stream")
	require.EqualValues(t, 1, e.Stats(tp).Prepare, "and RMQ still holds the delivery")
	w.Kill(t)

	fw := forwardtest.NewRecorder(rmqnats.Forwarder(b.js, subjectOf))
	closeForwarder(t, fw.L)
	e.Forward(tp, fw, consumer.WithSweepInterval(200*time.Millisecond))
	c := fw.NextOK(t, forwardtest.WaitLong)
	assert.Equal(t, "job-1", c.ID)
	assert.Equal(t, 2, c.Attempt)
	forwardtest.Eventually(t, forwardtest.WaitLong, "acked", func() bool { return e.Unacked(tp) == 0 })

	stored := storedMsgs(t, s)
	require.Len(t, stored, 1, "JetStream dropped the second publish as a duplicate")
	assert.Equal(t, "job-1", stored[0].DedupID)
	assert.Equal(t, "1", stored[0].Headers[rmqnats.HeaderAttempt], "the copy kept is the first")
	assert.Equal(t, forwardtest.Body(1), stored[0].Body)
}

// Close waits for what was forwarded and refuses more.
func TestCloseRefusesMore(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.stream(t, "CLOSE", "fw.>")
	fw := rmqnats.Forwarder(b.js, subjectOf)
	ctx := context.Background()
	m := &consumer.Message{ID: "a", Topic: "t", Body: []byte("x"), Attempt: 1}
	require.NoError(t, fw.OnMessage(ctx, m))
	require.NoError(t, fw.(rmqnats.Closer).Close(ctx))
	err := fw.OnMessage(ctx, m)
	require.ErrorIs(t, err, rmqnats.ErrClosed)
	require.NoError(t, fw.(rmqnats.Closer).Close(ctx), "a second Close")
}

// Options out of range are a program error, caught at construction.
func TestInvalidOptionsPanic(t *testing.T) {
	t.Parallel()
	var js jetstream.JetStream = nil
	assert.PanicsWithValue(t, "rmqnats: Forwarder with a nil JetStream", func() { rmqnats.Forwarder(js, subjectOf) })
	b := startBroker(t)
	assert.Panics(t, func() { rmqnats.Forwarder(b.js, subjectOf, rmqnats.WithWindow(0)) })
	func() {
		defer func() {
			err, _ := recover().(error)
			assert.True(t, errors.Is(err, consumer.ErrInvalidOption), "%v", err)
		}()
		rmqnats.Forwarder(b.js, subjectOf, rmqnats.WithPublishTimeout(0))
	}()
}
