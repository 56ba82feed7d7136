package rmqamqp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	rmqamqp "github.com/rmq-go/rmq/x/forward/amqp"
)

// 10,000 messages due within three seconds all reach the queue, each once,
// none before its due time, with body, headers, rmq-* headers and the RMQ
// id as message-id.
func TestForwardTenThousand(t *testing.T) {
	e := forwardtest.New(t)
	b := connect(t, brokertest.SharedRabbitMQ(t).URL())
	tp := e.Topic("orders")
	b.queue(t, tp.Name())
	live := b.consume(t, tp.Name())

	const n = 10_000
	sent := e.SendDue(tp, n, time.Now().Add(2*time.Second), 3*time.Second)
	e.Forward(tp, b.forwarder(t), consumer.WithConcurrency(256))

	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded and acked", func() bool {
		return live.len() >= n && e.Unacked(tp) == 0
	})
	sent.Check(t, tp, live.received(), false)
	assert.Zero(t, e.Stats(tp).Dead)
}

// A routing key no queue is bound for: the broker returns the mandatory
// publish (312 NO_ROUTE) before it confirms it; that is an error, retried,
// and the message ends in the dead queue with the broker's reason.
func TestUnroutableEndsDead(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := connect(t, brokertest.SharedRabbitMQ(t).URL())
	tp := e.Topic("unroutable")
	fw := forwardtest.NewRecorder(b.forwarder(t))
	_, err := rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey("lost"))
	require.NoError(t, err)
	e.Forward(tp, fw, consumer.WithMaxRetries(1), consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond }))

	forwardtest.Eventually(t, forwardtest.WaitLong, "message dead", func() bool { return e.Stats(tp).Dead == 1 })
	dead := e.Dead(tp)
	require.Len(t, dead, 1)
	assert.Equal(t, "lost", dead[0].ID)
	assert.Contains(t, dead[0].LastError, "rmqamqp: message unroutable: 312 NO_ROUTE")
	assert.Contains(t, dead[0].LastError, `key "`+tp.Name()+`"`)
	calls := fw.Calls()
	require.Len(t, calls, 2, "one attempt and one retry")
	for _, c := range calls {
		assert.ErrorIs(t, c.Err, rmqamqp.ErrUnroutable)
	}
}

// Returns pair with their own publishes: routable and unroutable messages
// forwarded at the same time each get their own answer.
func TestReturnsPairWithTheirPublish(t *testing.T) {
	t.Parallel()
	b := connect(t, brokertest.SharedRabbitMQ(t).URL())
	b.queue(t, "pair-routed")
	fw := b.forwarder(t)
	const n = 400
	errs := make(chan error, n)
	for i := range n {
		tp := "pair-routed"
		if i%3 == 0 {
			tp = "pair-nowhere"
		}
		go func() {
			errs <- fw.OnMessage(context.Background(), &consumer.Message{ID: forwardtest.ID(i), Topic: tp, Body: []byte("x"), Attempt: 1})
		}()
	}
	unroutable := 0
	for range n {
		err := <-errs
		if err != nil {
			require.ErrorIs(t, err, rmqamqp.ErrUnroutable)
			require.Contains(t, err.Error(), `key "pair-nowhere"`)
			unroutable++
		}
	}
	require.Equal(t, (n+2)/3, unroutable)
	got := b.drain(t, "pair-routed")
	require.Len(t, got, n-unroutable)
}

// A forwarder killed after the broker's confirm and before RMQ's ack: the
// message is delivered again once the lease runs out and published again;
// RabbitMQ keeps both, and both carry the same message-id.
func TestKilledBetweenConfirmAndAck(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := connect(t, brokertest.SharedRabbitMQ(t).URL())
	tp := e.Topic("killed")
	b.queue(t, tp.Name())
	_, err := rmqtest.Producer(t, e.RDB, e.Prefix).SendFixedTime(context.Background(), tp, forwardtest.Body(1), time.Now(),
		producer.WithKey("job-1"), producer.WithHeaders(forwardtest.Headers(1)))
	require.NoError(t, err)

	w := e.StartWorker(tp, b.url)
	require.Equal(t, "job-1", w.Confirmed(t, forwardtest.WaitLong))
	require.EqualValues(t, 1, e.Stats(tp).Prepare, "RMQ still holds the delivery")
	w.Kill(t)

	fw := forwardtest.NewRecorder(b.forwarder(t))
	e.Forward(tp, fw, consumer.WithSweepInterval(200*time.Millisecond))
	c := fw.NextOK(t, forwardtest.WaitLong)
	assert.Equal(t, "job-1", c.ID)
	assert.Equal(t, 2, c.Attempt)
	forwardtest.Eventually(t, forwardtest.WaitLong, "acked", func() bool { return e.Unacked(tp) == 0 })

	got := b.drain(t, tp.Name())
	require.Len(t, got, 2, "RabbitMQ does not deduplicate")
	for i, r := range got {
		assert.Equal(t, "job-1", r.DedupID, "message-id of copy %d", i)
		assert.Equal(t, "job-1", r.Headers[rmqamqp.HeaderID])
		assert.Equal(t, forwardtest.Body(1), r.Body)
	}
	assert.Equal(t, "1", got[0].Headers[rmqamqp.HeaderAttempt])
	assert.Equal(t, "2", got[1].Headers[rmqamqp.HeaderAttempt])
}

// A channel the broker closes (the exchange deleted under the forwarder)
// fails the forward with the broker's reason; the forwarder opens a new
// channel and forwards again once the exchange is back.
func TestChannelClosedByBroker(t *testing.T) {
	t.Parallel()
	b := connect(t, brokertest.SharedRabbitMQ(t).URL())
	b.admin(t, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("fw-gone", amqp.ExchangeFanout, false, false, false, false, nil)
	})
	fw, err := rmqamqp.Forwarder(b.conn, "fw-gone", routingKeyOf)
	require.NoError(t, err)
	defer fw.(rmqamqp.Closer).Close(context.Background())
	b.admin(t, func(ch *amqp.Channel) error { return ch.ExchangeDelete("fw-gone", false, false) })

	m := &consumer.Message{ID: "a", Topic: "t", Body: []byte("x"), Attempt: 1}
	err = fw.OnMessage(context.Background(), m)
	require.ErrorIs(t, err, rmqamqp.ErrNotConfirmed)
	require.Contains(t, err.Error(), "NOT_FOUND - no exchange 'fw-gone'")

	b.admin(t, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare("fw-gone", amqp.ExchangeFanout, false, true, false, false, nil); err != nil {
			return err
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			return err
		}
		return ch.QueueBind(q.Name, "", "fw-gone", false, nil)
	})
	require.NoError(t, fw.OnMessage(context.Background(), m))
}

// Forwarder refuses what cannot work: no recovery, a missing exchange, bad
// options.
func TestForwarderRefuses(t *testing.T) {
	t.Parallel()
	url := brokertest.SharedRabbitMQ(t).URL()
	plain, err := amqp.Dial(url)
	require.NoError(t, err)
	defer plain.Close()
	_, err = rmqamqp.Forwarder(plain, "", routingKeyOf)
	require.ErrorIs(t, err, rmqamqp.ErrNoRecovery)

	b := connect(t, url)
	_, err = rmqamqp.Forwarder(b.conn, "no-such-exchange", routingKeyOf)
	var aerr *amqp.Error
	require.True(t, errors.As(err, &aerr), "%v", err)
	require.Equal(t, amqp.NotFound, aerr.Code)
	_, err = rmqamqp.Forwarder(b.conn, "fw", nil)
	require.ErrorIs(t, err, consumer.ErrInvalidOption)
	_, err = rmqamqp.Forwarder(b.conn, "fw", routingKeyOf, rmqamqp.WithWindow(0))
	require.ErrorIs(t, err, consumer.ErrInvalidOption)

	fw, err := rmqamqp.Forwarder(b.conn, "fw", routingKeyOf)
	require.NoError(t, err)
	err = fw.OnMessage(context.Background(), &consumer.Message{ID: "a", Topic: string(make([]byte, 300)), Attempt: 1})
	require.ErrorContains(t, err, "routing key of 300 bytes")
	require.NoError(t, fw.(rmqamqp.Closer).Close(context.Background()))
	err = fw.OnMessage(context.Background(), &consumer.Message{ID: "a", Topic: "t", Attempt: 1})
	require.ErrorIs(t, err, rmqamqp.ErrClosed)

	// A connection its owner closed does not come back: the forward fails
	// at once with ErrConnectionClosed instead of waiting for it.
	own, err := dial(url)
	require.NoError(t, err)
	fw, err = rmqamqp.Forwarder(own, "fw", routingKeyOf)
	require.NoError(t, err)
	require.NoError(t, own.Close())
	begin := time.Now()
	err = fw.OnMessage(context.Background(), &consumer.Message{ID: "a", Topic: "t", Attempt: 1})
	require.ErrorIs(t, err, rmqamqp.ErrConnectionClosed)
	require.Less(t, time.Since(begin), time.Second)
	require.NoError(t, fw.(rmqamqp.Closer).Close(context.Background()))
}
