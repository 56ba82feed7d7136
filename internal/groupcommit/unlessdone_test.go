package groupcommit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/groupcommit"
)

// A DoUnlessDone caller that gives up before a round took its request
// takes it back: it never runs, and the queue goes on without it. One
// that gives up once its round runs waits for that round and succeeds.
func TestDoUnlessDoneTakesBackWhatNoRoundTook(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	g := groupcommit.New(1, r.run, nil)
	first := &req{}
	firstCtx, giveUpFirst := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.DoUnlessDone(firstCtx, first) }()
	require.Eventually(t, func() bool { return r.running.Load() == 1 }, 5*time.Second, time.Millisecond)
	giveUpFirst() // its round runs already

	gone := &req{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := g.DoUnlessDone(ctx, gone)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, g.Queued(), "the request left the queue")

	waiting := &req{}
	waited := make(chan error, 1)
	go func() { waited <- g.DoUnlessDone(context.Background(), waiting) }()
	require.Eventually(t, func() bool { return g.Queued() == 1 }, 5*time.Second, time.Millisecond)

	r.gate <- struct{}{} // the first round ends
	require.NoError(t, <-done, "a caller whose round ran gets its result")
	assert.Equal(t, 1, first.round)
	r.gate <- struct{}{} // the waiting request's round
	require.NoError(t, <-waited)
	assert.Equal(t, 2, waiting.round)
	assert.Zero(t, gone.round, "a request taken back never runs")

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, g.DoUnlessDone(ctx, &req{}), context.Canceled, "a done context queues nothing")
	assert.Zero(t, g.Queued())
}

// Idle is closed while nothing queues or runs, and is closed once the
// rounds under way and the queue behind them are done.
func TestIdle(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	g := groupcommit.New(1, r.run, nil)
	select {
	case <-g.Idle():
	default:
		t.Fatal("a new group is not idle")
	}
	done := make(chan error, 2)
	go func() { done <- g.Do(context.Background(), &req{}) }()
	require.Eventually(t, func() bool { return r.running.Load() == 1 }, 5*time.Second, time.Millisecond)
	go func() { done <- g.Do(context.Background(), &req{}) }()
	require.Eventually(t, func() bool { return g.Queued() == 1 }, 5*time.Second, time.Millisecond)
	idle := g.Idle()
	r.gate <- struct{}{}
	select {
	case <-idle:
		t.Fatal("idle while a request still queued")
	case <-time.After(20 * time.Millisecond):
	}
	r.gate <- struct{}{}
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	select {
	case <-idle:
	case <-time.After(5 * time.Second):
		t.Fatal("not idle after every round ran")
	}
}
