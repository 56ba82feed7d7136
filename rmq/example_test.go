package rmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// redisAddr is the address of the examples' redis-server, emptied for
// each example (TestMain stops it). In a program: the address of your
// Redis.
func redisAddr() string { return redistest.ExampleAddr() }

// A complete consumer and producer in one program: a timeout message per
// order, due when the order's payment window closes, handled by a listener.
// The client owns everything it starts; Close ends it.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()

	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	timeouts := topic.MustNew("order-timeouts", topic.FixedTime, 16)
	done := make(chan struct{})
	err = c.Register(timeouts, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		fmt.Printf("%s: %s\n", m.ID, m.Body)
		close(done)
		return nil // nil acks the delivery; an error would retry it
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	_, err = c.Producer().SendFixedTime(ctx, timeouts, []byte("cancel unless paid"),
		time.Now().Add(200*time.Millisecond), producer.WithKey("order-1001"))
	if err != nil {
		panic(err)
	}
	<-done
	// Output:
	// order-1001: cancel unless paid
}

// Serial per-key consumption across a fleet: every worker joins the fleet
// coordinated by ZooKeeper, and each slot of a topic is owned by one worker
// at a time. Send with the key whose messages must stay in order as slot
// basis (producer.WithSlotBasis). examples/fleet runs a fleet of three.
func ExampleWithZooKeeper() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	c, err := rmq.New(rdb,
		rmq.WithPrefix("shop"),
		rmq.WithZooKeeper([]string{"zk1:2181", "zk2:2181", "zk3:2181"},
			rmq.ZKSessionTimeout(10*time.Second), // how soon a dead worker's slots move
		))
	if err != nil {
		panic(err)
	}
	_ = c // Register, Start and Close as without ZooKeeper
}
