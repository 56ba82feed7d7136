package rmqkafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	rmqkafka "github.com/rmq-go/rmq/x/forward/kafka"
)

// 10,000 messages due within three seconds all reach the topic, each once,
// none produced before its due time, with value, headers, rmq-* headers
// and the RMQ id as key.
func TestForwardTenThousand(t *testing.T) {
	e := forwardtest.New(t)
	tp := e.Topic("orders")
	k := startCluster(t, "fw-"+tp.Name())

	const n = 10_000
	sent := e.SendDue(tp, n, time.Now().Add(2*time.Second), 3*time.Second)
	e.Forward(tp, k.forwarder(t), consumer.WithConcurrency(256))

	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded and acked", func() bool { return e.Unacked(tp) == 0 })
	got := k.consume(t, "fw-"+tp.Name(), -1)
	sent.Check(t, tp, got, false)
	assert.Len(t, got, n)
	assert.Zero(t, e.Stats(tp).Dead)
}

// WithPartitionKey replaces the key; the RMQ id stays in rmq-id.
func TestPartitionKey(t *testing.T) {
	t.Parallel()
	k := startCluster(t, "fw-keyed")
	cl := k.forwarder(t, rmqkafka.WithPartitionKey(func(m *consumer.Message) []byte { return []byte("customer-7") }),
		rmqkafka.WithHeaders(func(m *consumer.Message) map[string]string {
			return map[string]string{"extra": "x", rmqkafka.HeaderID: "spoofed"}
		}))
	require.NoError(t, cl.OnMessage(context.Background(), &consumer.Message{ID: "a", Topic: "keyed", Body: []byte("v"), Attempt: 1}))
	got := k.consume(t, "fw-keyed", 1)
	require.Len(t, got, 1)
	assert.Equal(t, "customer-7", got[0].DedupID)
	assert.Equal(t, "a", got[0].Headers[rmqkafka.HeaderID], "rmq-* headers win over extra ones")
	assert.Equal(t, "x", got[0].Headers["extra"])
	assert.Equal(t, "1", got[0].Headers[rmqkafka.HeaderAttempt])
	_, hasDue := got[0].Headers[rmqkafka.HeaderDueAt]
	assert.False(t, hasDue, "no due time without one")
}

// A forwarder killed after the produce acknowledgement and before RMQ's
// ack: the message is forwarded again once the lease runs out; the topic
// holds two records with the same key and rmq-id.
func TestKilledBetweenConfirmAndAck(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	tp := e.Topic("killed")
	k := startCluster(t, "fw-"+tp.Name())
	_, err := rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, forwardtest.Body(1), time.Now(),
		producer.WithKey("job-1"), producer.WithHeaders(forwardtest.Headers(1)))
	require.NoError(t, err)

	w := e.StartWorker(tp, k.addr())
	require.Equal(t, "job-1", w.Confirmed(t, forwardtest.WaitLong))
	require.EqualValues(t, 1, e.Stats(tp).Prepare, "RMQ still holds the delivery")
	w.Kill(t)

	fw := forwardtest.NewRecorder(k.forwarder(t))
	e.Forward(tp, fw, consumer.WithSweepInterval(200*time.Millisecond))
	c := fw.NextOK(t, forwardtest.WaitLong)
	assert.Equal(t, "job-1", c.ID)
	assert.Equal(t, 2, c.Attempt)
	forwardtest.Eventually(t, forwardtest.WaitLong, "acked", func() bool { return e.Unacked(tp) == 0 })

	got := k.consume(t, "fw-"+tp.Name(), 2)
	require.Len(t, got, 2)
	attempts := map[string]bool{}
	for _, r := range got {
		assert.Equal(t, "job-1", r.DedupID)
		assert.Equal(t, "job-1", r.Headers[rmqkafka.HeaderID])
		assert.Equal(t, forwardtest.Body(1), r.Body)
		attempts[r.Headers[rmqkafka.HeaderAttempt]] = true
	}
	assert.Equal(t, map[string]bool{"1": true, "2": true}, attempts)
}

// An empty topic name cannot be produced to: dead at once. After Close
// nothing more is taken.
func TestEmptyTopicAndClose(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	tp := e.Topic("notopic")
	k := startCluster(t)
	cl, err := newClient(k.addr())
	require.NoError(t, err)
	defer cl.Close()
	fw := forwardtest.NewRecorder(rmqkafka.Forwarder(cl, func(*consumer.Message) string { return "" }))
	_, err = rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey("a"))
	require.NoError(t, err)
	c := e.Forward(tp, fw)
	forwardtest.Eventually(t, forwardtest.WaitLong, "dead", func() bool { return e.Stats(tp).Dead == 1 })
	assert.Contains(t, e.Dead(tp)[0].LastError, "empty topic")
	assert.Len(t, fw.Calls(), 1)

	require.NoError(t, c.Close(context.Background()))

	closing := rmqkafka.Forwarder(cl, topicOf)
	require.NoError(t, closing.(rmqkafka.Closer).Close(context.Background()))
	err = closing.OnMessage(context.Background(), &consumer.Message{ID: "b", Topic: "t", Attempt: 1})
	require.ErrorIs(t, err, rmqkafka.ErrClosed)
}
