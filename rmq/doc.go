// Package rmq is the entry point of RMQ for Go: a Client wires a Redis
// client (a single node or a cluster), a producer and the consumers of
// registered topics, and owns their lifecycle (Start, Close). WithZooKeeper
// turns competing consumers into serial per-slot consumption across a fleet;
// WithObserver attaches metrics (Prometheus: module
// github.com/rmq-go/rmq/x/prometheus; OpenTelemetry: x/otel); Inspector
// reads queue sizes and lists, requeues and deletes dead messages.
//
// A minimal program:
//
//	c, _ := rmq.New(rdb)
//	orders := topic.MustNew("orders", topic.FixedTime, 16)
//	_ = c.Register(orders, consumer.ListenerFunc(handle))
//	_ = c.Start(ctx)
//	defer c.Close(ctx)
//	_, _ = c.Producer().SendFixedTime(ctx, orders, body, time.Now().Add(time.Minute))
package rmq
