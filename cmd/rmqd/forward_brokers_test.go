package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/procutil"
)

// rmqd --forward to RabbitMQ: a job published with delay=1 reaches the
// queue bound to the exchange and routing key of the URL at its due time,
// with the job id as message-id; the routing key defaults to the queue's
// name; a missing exchange is a warning at start; the URL's password is
// never shown.
func TestBinaryForwardAMQP(t *testing.T) {
	rabbit := brokertest.RabbitMQ(t)
	conn, err := amqp.Dial(rabbit.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("jobs", amqp.ExchangeDirect, true, false, false, false, nil))
	got := newArrivals()
	for queue, key := range map[string]string{"due-orders": "due", "refunds": "refunds"} {
		_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(queue, key, "jobs", false, nil))
		ds, err := ch.Consume(queue, "", true, false, false, false, nil)
		require.NoError(t, err)
		go func() {
			for d := range ds { // ends when the connection closes
				h := map[string]string{"queue": queue}
				for k, v := range d.Headers {
					h[k] = fmt.Sprint(v)
				}
				got.add(arrival{at: time.Now(), id: d.MessageId, body: string(d.Body), headers: h})
			}
		}()
	}

	base := rabbit.URL() // amqp://guest:guest@host:port/
	// A missing exchange, a wrong password: rmqd does not start.
	out := startFails(t, "shop/orders="+base+"?exchange=missing")
	require.Contains(t, out, `NOT_FOUND - no exchange 'missing'`)
	out = startFails(t, "shop/orders=amqp://guest:wrong-pw@"+rabbit.Addr()+"/?exchange=jobs")
	require.Contains(t, out, "username or password not allowed")
	require.NotContains(t, out, "wrong-pw")

	e := startForwarding(t, "shop/orders="+base+"?exchange=jobs&routing_key=due", "shop/refunds="+base+"?exchange=jobs")
	st := e.forwards(t)
	require.Equal(t, "amqp://guest:***@"+rabbit.Addr()+"/?exchange=jobs&routing_key=due", st["default:shop/orders"].Target)

	before := time.Now()
	id := e.publish(t, "orders", "?delay=1", "order 1")
	refund := e.publish(t, "refunds", "?delay_ms=500", "refund 1")
	after := time.Now()
	xs := byBody(got.wait(t, 2))
	x := xs["order 1"]
	checkTiming(t, x, before, after, time.Second)
	require.Equal(t, id, x.id)
	require.Equal(t, "due-orders", x.headers["queue"])
	require.Equal(t, "shop.orders", x.headers["rmq-topic"])
	y := xs["refund 1"]
	checkTiming(t, y, before, after, 500*time.Millisecond)
	require.Equal(t, refund, y.id)
	require.Equal(t, "refunds", y.headers["queue"], "routing key: the queue's name")
	require.Eventually(t, func() bool { return e.forwards(t)["default:shop/orders"].Forwarded == 1 }, waitLong, 20*time.Millisecond)

	require.Equal(t, 0, e.stop(t))
	require.NotContains(t, e.out.String(), ":guest@")
	require.NotContains(t, e.out.String(), "rmqd: close")
}

// rmqd --forward to Kafka (franz-go's kfake in this test process: no Kafka
// broker can be installed here): a job published with delay=1 is produced
// to the topic at its due time, keyed by its job id.
func TestBinaryForwardKafka(t *testing.T) {
	port, err := procutil.FreePort()
	require.NoError(t, err)
	k, err := kfake.NewCluster(kfake.Ports(port), kfake.SeedTopics(2, "due-orders"))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	addr := k.ListenAddrs()[0]

	out := startFails(t, "shop/orders=kafka://"+addr+"/no-topic")
	require.Contains(t, out, `no topic \"no-topic\" on the Kafka cluster`)
	e := startForwarding(t, "shop/orders=kafka://"+addr+"/due-orders")
	before := time.Now()
	id := e.publish(t, "orders", "?delay=1", "order 1", "Enable-Job-Version: YES", "Job-Attr-Trace: abc")
	after := time.Now()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("due-orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	var recs []*kgo.Record
	deadline := time.Now().Add(waitLong)
	for len(recs) == 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		recs = append(recs, cl.PollFetches(ctx).Records()...)
		cancel()
	}
	require.Len(t, recs, 1)
	r := recs[0]
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	// The record's timestamp is the producer's clock at produce time.
	checkTiming(t, arrival{at: r.Timestamp}, before.Truncate(time.Millisecond), after, time.Second)
	require.Equal(t, id, string(r.Key))
	require.Equal(t, "order 1", string(r.Value))
	require.Equal(t, id, h["rmq-id"])
	require.Equal(t, "abc", h["trace"])
	require.Eventually(t, func() bool { return e.forwards(t)["default:shop/orders"].Forwarded == 1 }, waitLong, 20*time.Millisecond)
	require.Equal(t, http.StatusConflict, do(t, "GET", e.api+"/api/shop/orders", "", "X-Token: "+e.tok).status)

	require.Equal(t, 0, e.stop(t))
	require.NotContains(t, e.out.String(), "rmqd: close")
}
