package rmqkafka_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqkafka "github.com/rmq-go/rmq/x/forward/kafka"
)

// The broker (kfake) gone for ten seconds while messages come due: RMQ
// acks nothing meanwhile and nothing goes dead; once it is back on the
// same port and data every message is in the topic, duplicates only with
// the same key.
func TestBrokerDownTenSeconds(t *testing.T) {
	e := forwardtest.New(t)
	tp := e.Topic("outage")
	k := startCluster(t, "fw-"+tp.Name())

	const n = 300
	const stopAfter = 30 // forwards seen before the broker stops
	start := time.Now()
	sent := e.SendDue(tp, n, start.Add(500*time.Millisecond), 3*time.Second)
	fw := forwardtest.NewRecorder(k.forwarder(t, rmqkafka.WithPublishTimeout(time.Second)))
	calls := forwardtest.NewInFlight(fw)
	e.Forward(tp, calls, consumer.WithConcurrency(64), consumer.WithMaxRetries(500),
		consumer.WithRetryBackoff(func(int) time.Duration { return 300 * time.Millisecond }))

	// The broker goes away mid-stream: some messages forwarded, most still
	// to come due.
	for range stopAfter {
		fw.NextOK(t, forwardtest.WaitLong)
	}
	k.stop()
	down := time.Now()
	// Forwards in flight when the broker went away end within the publish
	// timeout, and the acks of those that succeeded land; from then on
	// nothing may be acked.
	calls.WaitEnded(t, down, forwardtest.WaitLong)
	e.WaitAcksLanded(tp, fw, n)
	unacked := e.Unacked(tp)
	failedBefore := fw.Failed()
	t.Logf("broker down; %d of %d messages not forwarded yet", unacked, n)
	require.Positive(t, unacked, "every message was forwarded before the stop; the test proves nothing")
	e.HoldsFor(tp, 10*time.Second-time.Since(down), unacked)
	require.Greater(t, fw.Failed(), failedBefore, "no forward was tried while the broker was down")

	k.restart(t)
	t.Logf("broker back after %v", time.Since(down))
	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded after the restart", func() bool { return e.Unacked(tp) == 0 })
	require.Zero(t, e.Stats(tp).Dead)
	got := k.consume(t, "fw-"+tp.Name(), -1)
	sent.Check(t, tp, got, true)
	t.Logf("%d records for %d messages", len(got), n)
}
