package rmqamqp_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	rmqamqp "github.com/rmq-go/rmq/x/forward/amqp"
)

// TestMain runs the tests against a shared redis-server and a shared
// RabbitMQ node, or plays the forwarder that the kill test re-executes this
// binary as.
func TestMain(m *testing.M) {
	if forwardtest.IsWorker() {
		os.Exit(forwardtest.RunWorker(func(url string) (consumer.MessageListener, error) {
			conn, err := dial(url)
			if err != nil {
				return nil, err
			}
			return rmqamqp.Forwarder(conn, "fw", routingKeyOf)
		}))
	}
	code := m.Run()
	for _, stop := range []func() error{redistest.StopShared, brokertest.StopShared} {
		if err := stop(); err != nil {
			fmt.Println(err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// routingKeyOf is the routing key the tests forward a message with.
func routingKeyOf(m *consumer.Message) string { return m.Topic }

// dial connects the way the package documentation asks: with recovery
// that does not give up.
func dial(url string) (*amqp.Connection, error) {
	return amqp.DialConfig(url, amqp.Config{Recovery: &amqp.Recovery{
		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: math.MaxInt32, RetryInterval: 250 * time.Millisecond},
		ConnectionRecovery: &amqp.DefaultConnectionRecovery{},
	}})
}

// broker is one test's connection to a RabbitMQ node, with the exchange
// "fw" (direct, durable) declared.
type broker struct {
	url  string
	conn *amqp.Connection
}

func connect(t *testing.T, url string) *broker {
	t.Helper()
	conn, err := dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	b := &broker{url: url, conn: conn}
	b.admin(t, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("fw", amqp.ExchangeDirect, true, false, false, false, nil)
	})
	return b
}

// admin runs f on a channel of its own.
func (b *broker) admin(t *testing.T, f func(ch *amqp.Channel) error) {
	t.Helper()
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, f(ch))
}

// queue declares a durable queue named after the test's topic, bound to
// "fw" with the topic as routing key, and deletes it when the test ends.
func (b *broker) queue(t *testing.T, name string) {
	t.Helper()
	b.admin(t, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(name, name, "fw", false, nil)
	})
	t.Cleanup(func() {
		conn, err := amqp.Dial(b.url)
		if err != nil {
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
		}
	})
}

// forwarder is rmqamqp.Forwarder on "fw", closed when the test ends after
// the RMQ client (whose cleanup is registered later, so runs first).
func (b *broker) forwarder(t *testing.T, opts ...rmqamqp.Option) consumer.MessageListener {
	t.Helper()
	fw, err := rmqamqp.Forwarder(b.conn, "fw", routingKeyOf, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fw.(rmqamqp.Closer).Close(ctx); err != nil {
			t.Errorf("close forwarder: %v", err)
		}
	})
	return fw
}

// collector records what a consumer of one queue receives, with the time.
type collector struct {
	mu  sync.Mutex
	got []forwardtest.Received
}

// consume starts a consumer of queue on a connection of its own.
func (b *broker) consume(t *testing.T, queue string) *collector {
	t.Helper()
	conn, err := amqp.Dial(b.url)
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Qos(1000, 0, false))
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	require.NoError(t, err)
	c := &collector{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range deliveries {
			r := received(d)
			c.mu.Lock()
			c.got = append(c.got, r)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
	return c
}

func (c *collector) received() []forwardtest.Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]forwardtest.Received(nil), c.got...)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func received(d amqp.Delivery) forwardtest.Received {
	r := forwardtest.Received{At: time.Now(), DedupID: d.MessageId, Body: d.Body, Headers: map[string]string{}}
	for k, v := range d.Headers {
		r.Headers[k] = fmt.Sprint(v)
	}
	return r
}

// drain takes every message out of queue.
func (b *broker) drain(t *testing.T, queue string) []forwardtest.Received {
	t.Helper()
	var out []forwardtest.Received
	b.admin(t, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(queue, true)
			if err != nil || !ok {
				return err
			}
			out = append(out, received(d))
		}
	})
	return out
}
