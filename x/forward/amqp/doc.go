// Package rmqamqp forwards RMQ messages into RabbitMQ (AMQP 0-9-1) when
// they come due: RMQ keeps the message until its time (to the millisecond,
// never early; RabbitMQ has no arbitrary delays of its own), the forwarder
// publishes it to an exchange and RMQ acks it only once the broker
// confirmed it. It is a module of its own
// (github.com/rmq-go/rmq/x/forward/amqp), so only programs that forward to
// RabbitMQ download amqp091-go.
//
//	conn, _ := amqp.DialConfig(url, amqp.Config{Recovery: &amqp.Recovery{
//		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: math.MaxInt32, RetryInterval: time.Second},
//		ConnectionRecovery: &amqp.DefaultConnectionRecovery{},
//	}})
//	fw, err := rmqamqp.Forwarder(conn, "orders", func(m *consumer.Message) string { return m.Topic })
//	_ = client.Register(orders, fw, consumer.WithConcurrency(256))
//	_ = client.Start(ctx)
//	...
//	_ = client.Close(ctx)               // waits for running forwards
//	_ = fw.(rmqamqp.Closer).Close(ctx)  // and for those that timed out; closes the channel
//	_ = conn.Close()
//
// # What a forwarded message carries
//
// The body byte for byte; the message's headers (a W3C traceparent among
// them when the sender used x/otel) and the extra ones of WithHeaders, as
// AMQP string headers; rmq-id, rmq-topic, rmq-due-at and rmq-attempt; the
// RMQ message id as the message-id property; delivery mode persistent. The
// publish is mandatory.
//
// # Nothing lost; duplicates carry the same message-id
//
// OnMessage returns nil only after a publisher confirm (basic.ack) for a
// publish the broker did not return, so a message RMQ acked was routed to
// at least one queue (written to disk for a durable queue). Anything else
// is returned as an error, so RMQ's retries, backoff and dead queue apply:
// no confirm within the publish timeout, a nack or a channel lost before
// the confirm (ErrNotConfirmed), the connection down, a return
// (ErrUnroutable).
//
// RabbitMQ does not deduplicate. A forwarder that dies after the confirm
// and before RMQ's ack, or whose confirm was lost with the channel, leaves
// the message to be published again: the queue then holds two copies with
// the same message-id (and rmq-id), the later one with a higher
// rmq-attempt. Dropping the second is the consuming application's job
// (for instance, remember the message-ids seen in the last lease plus
// sweep interval).
//
// An unroutable publish (312 NO_ROUTE: no queue is bound for its routing
// key) is an error like any other, not a permanent one: queues come and go
// with their consumers (an exclusive or auto-delete queue is declared again
// after the consumer's own reconnect), so RMQ retries it with its backoff,
// and a message that stays unroutable ends in the dead queue after its
// retries with "rmqamqp: message unroutable: 312 NO_ROUTE" as its last
// error. To send such messages to the dead queue at once, wrap the
// listener:
//
//	consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
//		err := fw.OnMessage(ctx, m)
//		if errors.Is(err, rmqamqp.ErrUnroutable) {
//			return consumer.SkipRetry(err)
//		}
//		return err
//	})
//
// A header name or routing key over AMQP's 255 bytes goes to the dead
// queue at once.
//
// # Broker restarts
//
// The forwarder needs a connection dialed with Config.Recovery (Forwarder
// returns ErrNoRecovery otherwise), with a MaxRetryCount that outlasts the
// longest outage to ride out: once recovery gives up the connection is
// closed for good and every forward fails with ErrConnectionClosed. While
// the connection recovers, forwards wait (within the publish timeout) and
// fail; RMQ retries them. The forwarder publishes on a channel of its own
// that it puts into confirm mode before the first publish, and it drops
// that channel at its first close notification instead of publishing on
// amqp091's recovered one: a recovered channel restarts its delivery tags,
// and a publish made between its reopening and its confirm.select would be
// paired with the confirm of another message. A new channel is opened once
// the connection reports itself open again.
//
// Messages in a transient or non-durable queue do not survive a broker
// restart; use durable queues.
//
// # Batching and back-pressure
//
// Each handler publishes and waits for its own confirm, so the handlers of
// a consumer (consumer.WithConcurrency) keep many confirms in flight on the
// one channel. At most WithWindow publishes await a confirm at once; a
// slow broker makes handlers wait for a slot, and RMQ fetches no more than
// its handlers can take.
//
// Tests run against RabbitMQ 3.10, started by the tests.
package rmqamqp
