package producer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// SendFlow sends a tree of messages: here a batch of 100 resize jobs and
// one album job, their parent, that runs once after all of them, with
// their results.
func ExampleProducer_SendFlow() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb, rmq.WithPrefix("example-flow"))
	if err != nil {
		panic(err)
	}
	resizes := topic.MustNew("resizes", topic.Priority, 8)
	albums := topic.MustNew("albums", topic.FixedTime, 4)

	_ = c.Register(resizes, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		return m.SetResult([]byte("thumbs/" + m.ID + ".jpg"))
	}), consumer.WithConcurrency(8))
	done := make(chan struct{})
	_ = c.Register(albums, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		kids, err := m.Children(ctx) // in the order they finished
		if err != nil {
			return err
		}
		fmt.Printf("album %s: %d images, all %s\n", m.ID, len(kids), kids[0].State)
		close(done)
		return nil
	}))

	album := producer.FlowNode{Topic: albums, Body: []byte("summer"), Options: []producer.SendOption{producer.WithKey("summer")}}
	for i := range 100 {
		id := fmt.Sprintf("img-%03d", i)
		album.Children = append(album.Children, producer.FlowNode{
			Topic: resizes, Body: []byte(id), Priority: 100, Options: []producer.SendOption{producer.WithKey(id)},
		})
	}
	id, err := c.Producer().SendFlow(ctx, album)
	if err != nil {
		panic(err)
	}
	fmt.Println("sent:", id)
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Println("no album")
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = c.Close(closeCtx)
	// Output:
	// sent: summer
	// album summer: 100 images, all completed
}
