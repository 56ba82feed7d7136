package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// tenantOf is code deep in a handler that needs the message's tenant
// without being handed the message.
func tenantOf(ctx context.Context) string {
	if m, ok := consumer.MessageFromContext(ctx); ok {
		return m.Headers["tenant"]
	}
	return "none"
}

// Every handler call's context carries its message: MessageFromContext
// finds it anywhere below the listener.
func ExampleMessageFromContext() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	invoices := topic.MustNew("invoices", topic.Priority, 4)
	done := make(chan struct{})
	err = c.Register(invoices, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		defer close(done)
		fmt.Printf("rendering %s for tenant %s\n", m.Body, tenantOf(ctx))
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	_, err = c.Producer().SendPriority(ctx, invoices, []byte("invoice 5"), 40,
		producer.WithHeaders(map[string]string{"tenant": "acme"}))
	if err != nil {
		panic(err)
	}
	<-done
	// Output:
	// rendering invoice 5 for tenant acme
}

// recordErrors is a middleware: it runs around every delivery of the
// listener it wraps and counts the failed ones per topic.
func recordErrors(failed map[string]int) consumer.Middleware {
	return func(next consumer.MessageListener) consumer.MessageListener {
		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			err := next.OnMessage(ctx, m)
			if err != nil {
				failed[m.Topic]++
			}
			return err
		})
	}
}

// ContextWithMessage builds the context a consumer gives a handler, so a
// unit test can call a listener or middleware directly, without Redis.
func ExampleContextWithMessage() {
	failed := map[string]int{}
	listener := recordErrors(failed)(consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if tenantOf(ctx) == "" {
			return errors.New("no tenant")
		}
		return nil
	}))

	for _, headers := range []map[string]string{{"tenant": "acme"}, nil} {
		m := &consumer.Message{ID: "invoice-5", Topic: "invoices", Attempt: 1, Headers: headers}
		err := listener.OnMessage(consumer.ContextWithMessage(context.Background(), m), m)
		fmt.Println("err:", err)
	}
	fmt.Println("failed:", failed)
	// Output:
	// err: <nil>
	// err: no tenant
	// failed: map[invoices:1]
}

// A middleware for one topic wraps its listener before Register (a
// client's rmq.WithMiddleware wraps every topic's). This one gives up on a
// message after its third attempt instead of the topic's sixteen retries.
func ExampleMiddleware() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	ends := newOutcomes()
	c, err := rmq.New(rdb, rmq.WithObserver(ends))
	if err != nil {
		panic(err)
	}

	var giveUpAfter3 consumer.Middleware = func(next consumer.MessageListener) consumer.MessageListener {
		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			err := next.OnMessage(ctx, m)
			if err != nil && m.Attempt >= 3 {
				return consumer.SkipRetry(err)
			}
			return err
		})
	}
	syncs := topic.MustNew("crm-sync", topic.FixedTime, 8)
	listener := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		return errors.New("CRM unreachable")
	})
	err = c.Register(syncs, giveUpAfter3(listener),
		consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	if _, err := c.Producer().SendFixedTime(ctx, syncs, []byte("contact 8"), time.Now(), producer.WithKey("contact-8")); err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println(<-ends.ch)
	}
	// Output:
	// contact-8 attempt 1: retried
	// contact-8 attempt 2: retried
	// contact-8 attempt 3: dead
}
