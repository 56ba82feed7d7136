// Package rmqnats forwards RMQ messages into NATS JetStream when they come
// due: RMQ keeps the message until its time (to the millisecond, never
// early), the forwarder publishes it to a stream and RMQ acks it only once
// JetStream confirmed it. It is a module of its own
// (github.com/rmq-go/rmq/x/forward/nats), so only programs that forward to
// NATS download nats.go.
//
//	nc, _ := nats.Connect(url, nats.MaxReconnects(-1))
//	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
//	fw := rmqnats.Forwarder(js, func(m *consumer.Message) string { return "orders." + m.Topic })
//	_ = client.Register(orders, fw, consumer.WithConcurrency(256))
//	_ = client.Start(ctx)
//	...
//	_ = client.Close(ctx)                // waits for running forwards
//	_ = fw.(rmqnats.Closer).Close(ctx)   // and for those that timed out
//
// # What a forwarded message carries
//
// The body byte for byte; the message's headers (a W3C traceparent among
// them when the sender used x/otel) and the extra ones of WithHeaders; and
// rmq-id, rmq-topic, rmq-due-at and rmq-attempt. Nats-Msg-Id is the RMQ
// message id (WithMsgID picks another).
//
// # Nothing lost, nothing doubled
//
// OnMessage returns nil only after JetStream's PubAck, so a message RMQ
// acked is stored in the stream. Any failure (no PubAck within the publish
// timeout, a disconnect, no stream) is returned, so RMQ's retries, backoff
// and dead queue apply. A forwarder that dies after the PubAck and before
// RMQ's ack leaves the message to be delivered again after its lease; its
// second publish carries the same Nats-Msg-Id and JetStream drops it as a
// duplicate (the PubAck says so, and OnMessage returns nil): the stream
// holds one copy. For that the stream's duplicate window (StreamConfig.
// Duplicates, 2 minutes by default) must be longer than the consumer's
// lease (consumer.WithPrepareTimeout) plus its sweep interval. The same
// holds for a publish that timed out while nats.go was disconnected: it is
// still sent from the reconnect buffer, and deduplicated.
//
// A subject no stream captures fails with "nats: no response from stream"
// (jetstream.ErrNoStreamResponse, after nats.go's own two retries). It is
// retried like any error: a stream created after the forwarder started (by
// a consumer application, or JetStream still recovering its streams after
// a restart) heals without an operator, and a subject that stays unrouted
// ends in the dead queue after the retries with that error as its last
// error. To send such messages to the dead queue at once, wrap the
// listener:
//
//	consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
//		err := fw.OnMessage(ctx, m)
//		if errors.Is(err, jetstream.ErrNoStreamResponse) {
//			return consumer.SkipRetry(err)
//		}
//		return err
//	})
//
// Errors no retry can cure go to the dead queue at once: an empty subject,
// a header NATS cannot carry (ErrInvalidHeader), a body over the server's
// max_payload.
//
// # Batching and back-pressure
//
// Each handler publishes asynchronously and waits for its own PubAck, so
// the handlers of a consumer (consumer.WithConcurrency) pipeline their
// publishes on the connection. At most WithWindow publishes await a PubAck
// at once; a slow server makes handlers wait for a slot, and RMQ fetches
// no more than its handlers can take: a slow broker slows consumption
// instead of growing memory.
//
// # What the connection needs
//
//   - Reconnects without end (nats.MaxReconnects(-1)): a connection that
//     gives up is closed for good and every later forward fails.
//   - A reconnect buffer (the default 8 MB): publishes made while
//     disconnected wait there.
//   - A JetStream handle with jetstream.WithPublishAsyncTimeout: without
//     it a publish whose PubAck is lost holds a window slot until Close.
//   - A stream capturing every subject the forwarder publishes to, with a
//     duplicate window as above.
//
// Tests run against nats-server 2.9 with JetStream, started by the tests.
package rmqnats
