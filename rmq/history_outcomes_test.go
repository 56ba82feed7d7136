package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// forwarderLike is a listener marked as a forwarder, as the x/forward
// modules' listeners are: its acked deliveries count as forwarded.
type forwarderLike struct{ done chan struct{} }

func (f forwarderLike) OnMessage(context.Context, *consumer.Message) error {
	f.done <- struct{}{}
	return nil
}

func (forwarderLike) ForwardsToBroker() {}

// Each outcome lands in its column of the history: a handler's failure
// retried, a forwarder's ack forwarded (and completed), a cancel, pulled
// deliveries acked by the Delivery and by id, and one nacked by id.
func TestHistoryOutcomes(t *testing.T) {
	e := rmqtest.New(t)
	ctx := rmqtest.Ctx(t)
	retried := rmqtest.MustTopic(t, "retried", topic.FixedTime, 1)
	fwd := rmqtest.MustTopic(t, "fwd", topic.FixedTime, 1)
	pulled := rmqtest.MustTopic(t, "pulled", topic.FixedTime, 1)
	c, err := rmq.New(e.RDB, rmq.WithPrefix(e.Prefix), rmq.WithLogger(e.Logger))
	require.NoError(t, err)
	acked := make(chan struct{}, 10)
	require.NoError(t, c.Register(retried, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.Attempt == 1 {
			return errors.New("once")
		}
		acked <- struct{}{}
		return nil
	}), consumer.WithRetryBackoff(func(int) time.Duration { return time.Millisecond })))
	f := forwarderLike{done: make(chan struct{}, 10)}
	require.NoError(t, c.Register(fwd, f))
	require.NoError(t, c.Start(ctx))
	p := c.Producer()
	_, err = p.SendFixedTime(ctx, retried, []byte("r"), time.Now())
	require.NoError(t, err)
	for i := range 3 {
		_, err = p.SendFixedTime(ctx, fwd, []byte(fmt.Sprint("f", i)), time.Now())
		require.NoError(t, err)
	}
	for i := range 4 {
		_, err = p.SendFixedTime(ctx, pulled, []byte(fmt.Sprint("p", i)), time.Now())
		require.NoError(t, err)
	}
	id, err := p.SendFixedTime(ctx, retried, []byte("cancel me"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	<-acked
	for range 3 {
		<-f.done
	}
	ok, err := c.Inspector().Cancel(ctx, retried, id)
	require.NoError(t, err)
	require.True(t, ok)
	ds, err := c.Pull(ctx, []topic.Topic{pulled}, 4)
	require.NoError(t, err)
	require.Len(t, ds, 4)
	require.NoError(t, ds[0].Ack(ctx))
	ok, err = c.AckByID(ctx, pulled, ds[1].ID)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = c.NackByID(ctx, pulled, ds[2].ID, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, ds[3].Ack(ctx))
	require.NoError(t, c.Close(ctx))

	in := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix))
	for _, want := range []struct {
		t    topic.Topic
		want rmq.MetricPoint
	}{
		{retried, rmq.MetricPoint{Sent: 2, Completed: 1, Retried: 1, Cancelled: 1}},
		{fwd, rmq.MetricPoint{Sent: 3, Completed: 3, Forwarded: 3}},
		{pulled, rmq.MetricPoint{Sent: 4, Completed: 3, Retried: 1}},
	} {
		ps, err := in.History(ctx, want.t, time.Now().Add(-2*time.Minute))
		require.NoError(t, err)
		require.Equal(t, want.want, sumHistory(ps), want.t.Name())
	}
}
