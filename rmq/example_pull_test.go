package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Pull consumption: the caller takes messages when it wants them, each
// leased to it, and ends every one with Ack (or Nack). A client that only
// pulls registers no listener; it must still be started.
func ExampleClient_Pull() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	// One slot: one order for the whole topic, highest priority first.
	jobs := topic.MustNew("jobs", topic.Priority, 1)
	p := c.Producer()
	if _, err := p.SendPriority(ctx, jobs, []byte("resize image 7"), 20, producer.WithKey("img-7")); err != nil {
		panic(err)
	}
	if _, err := p.SendPriority(ctx, jobs, []byte("send invoice 3"), 50, producer.WithKey("inv-3")); err != nil {
		panic(err)
	}

	ds, err := c.Pull(ctx, []topic.Topic{jobs}, 10, rmq.WithLease(time.Minute))
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Printf("%s (priority %d): %s\n", d.ID, d.Priority, d.Body)
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	st, err := c.Inspector().Stats(ctx, jobs)
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting:", st.Store, "in flight:", st.Prepare)
	// Output:
	// inv-3 (priority 50): send invoice 3
	// img-7 (priority 20): resize image 7
	// waiting: 0 in flight: 0
}

// A long-poll: with WithWait, Pull waits for a message to come due (woken
// by the send, never polling) instead of returning nothing at once.
func ExampleClient_Pull_wait() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	reminders := topic.MustNew("reminders", topic.FixedTime, 8)
	due := time.Now().Add(300 * time.Millisecond)
	if _, err := c.Producer().SendFixedTime(ctx, reminders, []byte("stand up"), due, producer.WithKey("r-1")); err != nil {
		panic(err)
	}

	ds, err := c.Pull(ctx, []topic.Topic{reminders}, 1, rmq.WithWait(10*time.Second))
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Printf("%s: %s (due: %v)\n", d.ID, d.Body, !time.Now().Before(due))
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// r-1: stand up (due: true)
}

// Nack ends a pulled delivery as failed: the message comes back after the
// given delay with its attempt counted and the cause as its last error.
func ExampleDelivery_Nack() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	emails := topic.MustNew("emails", topic.FixedTime, 8)
	if _, err := c.Producer().SendFixedTime(ctx, emails, []byte("welcome ann"), time.Now(), producer.WithKey("mail-1")); err != nil {
		panic(err)
	}
	pull := func() *rmq.Delivery {
		ds, err := c.Pull(ctx, []topic.Topic{emails}, 1, rmq.WithWait(10*time.Second))
		if err != nil || len(ds) == 0 {
			panic(fmt.Sprint("nothing pulled: ", err))
		}
		return ds[0]
	}

	d := pull()
	fmt.Printf("attempt %d of %s\n", d.Attempt, d.ID)
	if err := d.Nack(ctx, 200*time.Millisecond, errors.New("smtp: try again later")); err != nil {
		panic(err)
	}

	d = pull() // back 200 ms later
	fmt.Printf("attempt %d of %s, last error %q\n", d.Attempt, d.ID, d.LastError)
	if err := d.Ack(ctx); err != nil {
		panic(err)
	}
	// Output:
	// attempt 1 of mail-1
	// attempt 2 of mail-1, last error "smtp: try again later"
}

// AckByID acks a delivery by its message id alone, for a caller that kept
// nothing else (an HTTP service that handed the id to its client). It says
// whether there was a delivery to ack.
func ExampleClient_AckByID() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	exports := topic.MustNew("exports", topic.Priority, 4)
	if _, err := c.Producer().SendPriority(ctx, exports, []byte("export report 12"), 30, producer.WithKey("report-12")); err != nil {
		panic(err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{exports}, 1)
	if err != nil || len(ds) != 1 {
		panic(fmt.Sprint("nothing pulled: ", err))
	}
	id := ds[0].ID // all the caller keeps

	acked, err := c.AckByID(ctx, exports, id)
	if err != nil {
		panic(err)
	}
	fmt.Println("acked:", acked)
	acked, err = c.AckByID(ctx, exports, id)
	if err != nil {
		panic(err)
	}
	fmt.Println("acked again:", acked)
	// Output:
	// acked: true
	// acked again: false
}
