package producer_test

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

// WithUniqueFor refuses a repeat of an id within its window, whatever
// became of the first message: here a receipt mail is sent once per order
// for a day, even after it was delivered and acked. On a range-merge topic
// the repeat is refused, not merged into the waiting message: the caller
// learns it was a repeat.
func ExampleWithUniqueFor() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	receipts := topic.MustNew("receipts", topic.RangeMerge, 4)
	delivered := make(chan string, 1)
	err = c.Register(receipts, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		delivered <- string(m.Body)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	send := func(body string) {
		_, err := c.Producer().SendRangeMerge(ctx, receipts, []byte(body), 0,
			producer.WithKey("order-1001"), producer.WithUniqueFor(24*time.Hour))
		switch {
		case errors.Is(err, producer.ErrDuplicate):
			fmt.Println("refused:", body)
		case err != nil:
			panic(err)
		default:
			fmt.Println("sent:", body)
		}
	}
	send("receipt for order 1001")
	fmt.Println("delivered:", <-delivered)
	send("receipt for order 1001, again")
	// Output:
	// sent: receipt for order 1001
	// delivered: receipt for order 1001
	// refused: receipt for order 1001, again
}
