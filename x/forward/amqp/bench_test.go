package rmqamqp_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqamqp "github.com/rmq-go/rmq/x/forward/amqp"
)

// BenchmarkForward: messages/s forwarded from a backlog of 20,000 and the
// lateness from due time to publisher confirm of 5,000 messages coming due
// over five seconds, into durable queues of a local RabbitMQ node:
//
//	go test -run '^$' -bench Forward -benchtime 1x ./x/forward/amqp
func BenchmarkForward(b *testing.B) {
	srv := brokertest.RabbitMQ(b)
	conn, err := dial(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.ExchangeDeclare("fw", amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{forwardtest.BenchBacklogTopic, forwardtest.BenchTimedTopic} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		if err := ch.QueueBind(q, q, "fw", false, nil); err != nil {
			b.Fatal(err)
		}
	}
	_ = ch.Close()
	fw, err := rmqamqp.Forwarder(conn, "fw", routingKeyOf)
	if err != nil {
		b.Fatal(err)
	}
	defer fw.(rmqamqp.Closer).Close(context.Background())
	forwardtest.Bench(b, fw, forwardtest.BenchConfig{
		Backlog: 20_000, Timed: 5_000, Over: 5 * time.Second, Concurrency: 256, BrokerPID: srv.Pid(),
	})
}
