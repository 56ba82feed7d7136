package producer_test

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

// SendBatch stores many messages of one topic in one script call per slot.
// It checks every message first: one bad message fails the whole batch and
// nothing is written.
func ExampleProducer_SendBatch() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	reminders := topic.MustNew("reminders", topic.FixedTime, 8)
	tomorrow := time.Now().Add(24 * time.Hour)
	ids, err := p.SendBatch(ctx, reminders, []producer.BatchMessage{
		{Key: "user-1", Body: []byte("finish sign-up"), At: tomorrow},
		{Key: "user-2", Body: []byte("finish sign-up"), At: tomorrow},
		{Key: "user-3", Body: []byte("finish sign-up"), At: tomorrow.Add(time.Hour)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("sent:", ids)

	_, err = p.SendBatch(ctx, reminders, []producer.BatchMessage{
		{Key: "user-4", Body: []byte("finish sign-up"), At: tomorrow},
		{Key: "user-5", At: tomorrow}, // no body
	})
	fmt.Println("refused:", errors.Is(err, producer.ErrEmptyBody))

	st, err := c.Inspector().Stats(ctx, reminders)
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting:", st.Store)
	// Output:
	// sent: [user-1 user-2 user-3]
	// refused: true
	// waiting: 3
}

// SendMany stores messages of several topics in as few round trips as the
// backend allows, and answers for each message on its own: a bad one is
// refused without holding back the others.
func ExampleProducer_SendMany() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	jobs := topic.MustNew("jobs", topic.Priority, 4)
	prices := topic.MustNew("price-changes", topic.RangeMerge, 8)
	msgs := []producer.TopicMessage{
		{Topic: jobs, BatchMessage: producer.BatchMessage{Key: "job-1", Body: []byte("rebuild index"), Priority: 50}},
		{Topic: prices, BatchMessage: producer.BatchMessage{Key: "sku-1", Body: []byte("9.99"), TimeRange: time.Minute}},
		{Topic: jobs, BatchMessage: producer.BatchMessage{Key: "job-2", Body: []byte("vacuum"), Priority: 3}}, // below topic.MinPriority
	}
	ids, errs := p.SendMany(ctx, msgs)
	for i := range msgs {
		if errs[i] != nil {
			fmt.Printf("%s: refused (invalid priority: %v)\n", msgs[i].Key, errors.Is(errs[i], producer.ErrInvalidPriority))
			continue
		}
		fmt.Printf("%s: sent to %s as %s\n", msgs[i].Key, msgs[i].Topic.Name(), ids[i])
	}
	// Output:
	// job-1: sent to jobs as job-1
	// sku-1: sent to price-changes as sku-1
	// job-2: refused (invalid priority: true)
}
