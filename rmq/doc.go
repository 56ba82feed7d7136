// Package rmq is the entry point of RMQ for Go: a Client wires a Redis
// client, a producer and the consumers of registered topics, and owns their
// lifecycle (Start, Close).
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
