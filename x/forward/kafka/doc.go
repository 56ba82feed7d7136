// Package rmqkafka forwards RMQ messages into Kafka when they come due:
// RMQ keeps the message until its time (to the millisecond, never early;
// Kafka has no delayed delivery at all), the forwarder produces it as a
// record and RMQ acks it only once the record was acknowledged. It is a
// module of its own (github.com/rmq-go/rmq/x/forward/kafka), so only
// programs that forward to Kafka download franz-go.
//
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordDeliveryTimeout(time.Minute))
//	fw := rmqkafka.Forwarder(cl, func(m *consumer.Message) string { return "orders" })
//	_ = client.Register(orders, fw, consumer.WithConcurrency(256))
//	_ = client.Start(ctx)
//	...
//	_ = client.Close(ctx)                // waits for running forwards
//	_ = fw.(rmqkafka.Closer).Close(ctx)  // and for records that timed out
//	cl.Close()
//
// # What a forwarded record carries
//
// The body byte for byte as the value; the message's headers (a W3C
// traceparent among them when the sender used x/otel) and the extra ones
// of WithHeaders; rmq-id, rmq-topic, rmq-due-at and rmq-attempt. The key is
// the RMQ message id unless WithPartitionKey picks another.
//
// # Nothing lost; duplicates carry the same id
//
// OnMessage returns nil only once the client reports the record produced
// (acknowledged by the partition leader under the client's acks setting,
// all in-sync replicas by default), so a message RMQ acked is in the log.
// Anything else (no acknowledgement within the publish timeout, a record
// the client failed) is returned as an error, so RMQ's retries, backoff and
// dead queue apply; a record too large for the broker goes to the dead
// queue at once, as does an empty topic name.
//
// Kafka's idempotent producer deduplicates retries of one produce request,
// not a second record: a forwarder that dies after the acknowledgement and
// before RMQ's ack leaves the message to be forwarded again, and a record
// that timed out while the broker was away may still be delivered by the
// client after RMQ retried it. The log then holds two records with the
// same key (when it is the RMQ id) and the same rmq-id header, the later
// with a higher rmq-attempt; dropping the second is the consuming
// application's job.
//
// # Broker restarts
//
// franz-go reconnects by itself. Once a produce request is on the wire the
// client keeps retrying it and ignores the record's context, so a
// ProduceSync would wait as long as the broker is down; the forwarder
// instead stops waiting at the publish timeout (RMQ retries the message
// after its backoff) and keeps the record's window slot until the client
// is done with it, so records abandoned during an outage are bounded by
// the window, not piling up in the client.
//
// # What the client needs
//
//   - The default idempotent producer with acks from all in-sync replicas,
//     or at least leader acks: with kgo.NoAck a record counts as produced
//     when it was written to the socket.
//   - kgo.RecordDeliveryTimeout (or RecordRetries), so that a record the
//     cluster cannot take is failed instead of holding its window slot
//     until the forwarder's Close.
//   - Topics that exist, or kgo.AllowAutoTopicCreation.
//
// # Batching and back-pressure
//
// Each handler produces asynchronously and waits for its own record; the
// client batches the records of concurrent handlers (consumer.
// WithConcurrency) per partition, with its own linger and batch size. At
// most WithWindow records await their acknowledgement at once; a slow
// cluster makes handlers wait for a slot, and RMQ fetches no more than its
// handlers can take.
//
// Kafka cannot be installed on the machines this project is built on: the
// tests run against franz-go's kfake, a Kafka-protocol server inside the
// test process (restartable on the same port and data directory), not
// against a Kafka broker.
package rmqkafka
