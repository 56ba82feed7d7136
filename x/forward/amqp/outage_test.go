package rmqamqp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqamqp "github.com/rmq-go/rmq/x/forward/amqp"
)

// RabbitMQ stopped for ten seconds while messages come due: RMQ acks
// nothing meanwhile and nothing goes dead (the retries are far from spent);
// once the node is back (and the connection recovered) every message is in
// the durable queue, duplicates only with the same message-id.
func TestBrokerDownTenSeconds(t *testing.T) {
	e := forwardtest.New(t)
	srv := brokertest.RabbitMQ(t)
	b := connect(t, srv.URL())
	tp := e.Topic("outage")
	b.queue(t, tp.Name())

	const n = 300
	const stopAfter = 30 // forwards seen before the broker stops
	start := time.Now()
	sent := e.SendDue(tp, n, start.Add(500*time.Millisecond), 3*time.Second)
	fw := forwardtest.NewRecorder(b.forwarder(t, rmqamqp.WithPublishTimeout(time.Second)))
	calls := forwardtest.NewInFlight(fw)
	e.Forward(tp, calls, consumer.WithConcurrency(64), consumer.WithMaxRetries(500),
		consumer.WithRetryBackoff(func(int) time.Duration { return 300 * time.Millisecond }))

	// The node goes away mid-stream: some messages forwarded, most still
	// to come due.
	for range stopAfter {
		fw.NextOK(t, forwardtest.WaitLong)
	}
	stopping := time.Now()
	require.NoError(t, srv.Shutdown())
	down := time.Now()
	t.Logf("node stopped in %v", down.Sub(stopping))
	// Forwards in flight when the node went away end within the publish
	// timeout, and the acks of those that succeeded land; from then on
	// nothing may be acked.
	calls.WaitEnded(t, down, forwardtest.WaitLong)
	e.WaitAcksLanded(tp, fw, n)
	unacked := e.Unacked(tp)
	failedBefore := fw.Failed()
	t.Logf("node down; %d of %d messages not forwarded yet", unacked, n)
	require.Positive(t, unacked, "every message was forwarded before the stop; the test proves nothing")
	e.HoldsFor(tp, 10*time.Second-time.Since(stopping), unacked)
	require.Greater(t, fw.Failed(), failedBefore, "no forward was tried while the node was down")

	require.NoError(t, srv.Restart(context.Background()))
	t.Logf("node back after %v", time.Since(stopping))
	forwardtest.Eventually(t, 2*forwardtest.WaitLong, "all forwarded after the restart", func() bool {
		return e.Unacked(tp) == 0
	})
	require.Zero(t, e.Stats(tp).Dead)
	got := b.drain(t, tp.Name())
	sent.Check(t, tp, got, true)
	t.Logf("%d copies of %d messages in the queue", len(got), n)
}
