package rmqnats_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqnats "github.com/rmq-go/rmq/x/forward/nats"
)

// nats-server stopped for ten seconds while messages come due: RMQ acks
// nothing meanwhile and nothing goes dead (the retries are far from spent);
// once the server is back every message is in the stream exactly once
// (publishes sent from the reconnect buffer are deduplicated).
func TestServerDownTenSeconds(t *testing.T) {
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("outage")
	s := b.stream(t, "OUTAGE", subjectOf(&consumer.Message{Topic: tp.Name()}))

	const n = 300
	const stopAfter = 30 // forwards seen before the broker stops
	start := time.Now()
	sent := e.SendDue(tp, n, start.Add(500*time.Millisecond), 3*time.Second)
	fw := forwardtest.NewRecorder(rmqnats.Forwarder(b.js, subjectOf, rmqnats.WithPublishTimeout(time.Second)))
	closeForwarder(t, fw.L)
	calls := forwardtest.NewInFlight(fw)
	e.Forward(tp, calls, consumer.WithConcurrency(64), consumer.WithMaxRetries(500),
		consumer.WithRetryBackoff(func(int) time.Duration { return 300 * time.Millisecond }))

	// The server goes away mid-stream: some messages forwarded, most still
	// to come due.
	for range stopAfter {
		fw.NextOK(t, forwardtest.WaitLong)
	}
	require.NoError(t, b.srv.Shutdown())
	down := time.Now()
	// Forwards in flight when the server went away end within the publish
	// timeout, and the acks of those that succeeded land; from then on
	// nothing may be acked.
	calls.WaitEnded(t, down, forwardtest.WaitLong)
	e.WaitAcksLanded(tp, fw, n)
	unacked := e.Unacked(tp)
	failedBefore := fw.Failed()
	t.Logf("server down; %d of %d messages not forwarded yet", unacked, n)
	require.Positive(t, unacked, "every message was forwarded before the stop; the test proves nothing")
	e.HoldsFor(tp, 10*time.Second-time.Since(down), unacked)
	require.Greater(t, fw.Failed(), failedBefore, "no forward was tried while the server was down")

	require.NoError(t, b.srv.Restart(context.Background()))
	t.Logf("server back after %v", time.Since(down))
	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded after the restart", func() bool {
		return e.Unacked(tp) == 0
	})
	require.Zero(t, e.Stats(tp).Dead)
	stored := storedMsgs(t, s)
	sent.Check(t, tp, stored, false)
	require.Len(t, stored, n)
}

// A server that stops answering (SIGSTOP): no more than the window's
// publishes await a PubAck however many messages are due, and when it
// answers again every message is forwarded once and Close finds nothing
// outstanding.
func TestStalledServerBoundsInFlight(t *testing.T) {
	t.Parallel()
	e := forwardtest.New(t)
	b := startBroker(t)
	tp := e.Topic("stalled")
	s := b.stream(t, "STALLED", subjectOf(&consumer.Message{Topic: tp.Name()}))
	const window = 8
	fw := forwardtest.NewRecorder(rmqnats.Forwarder(b.js, subjectOf, rmqnats.WithWindow(window), rmqnats.WithPublishTimeout(500*time.Millisecond)))
	e.Forward(tp, fw, consumer.WithConcurrency(64), consumer.WithMaxRetries(500),
		consumer.WithRetryBackoff(func(int) time.Duration { return 100 * time.Millisecond }))

	require.NoError(t, b.srv.Suspend())
	const n = 400
	sent := e.SendDue(tp, n, time.Now(), 0)
	// Sampled through the stall until three windows' worth of forwards
	// timed out: retries went through the window again and again.
	var peak atomic.Int64
	require.Eventually(t, func() bool {
		if p := int64(b.js.PublishAsyncPending()); p > peak.Load() {
			peak.Store(p) // one sampler at a time
		}
		return fw.Failed() >= 3*window
	}, forwardtest.WaitLong, 5*time.Millisecond, "forwards did not time out")
	require.LessOrEqual(t, peak.Load(), int64(window), "publishes awaiting a PubAck")
	require.EqualValues(t, window, peak.Load(), "the window never filled; the test proves nothing")
	require.EqualValues(t, n, e.Unacked(tp))
	require.Positive(t, fw.Failed(), "no forward timed out")

	require.NoError(t, b.srv.Resume())
	forwardtest.Eventually(t, forwardtest.WaitLong, "all forwarded", func() bool { return e.Unacked(tp) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, fw.L.(rmqnats.Closer).Close(ctx))
	require.Zero(t, b.js.PublishAsyncPending())
	sent.Check(t, tp, storedMsgs(t, s), false)
}
