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

// The dead queue holds the messages that failed more often than their
// retries allow. Dead lists it, newest death first, with each message's
// last error.
func ExampleInspector_Dead() {
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

	webhooks := topic.MustNew("webhooks", topic.FixedTime, 1)
	for _, id := range []string{"hook-1", "hook-2"} {
		_, err := c.Producer().SendFixedTime(ctx, webhooks, []byte("POST /orders "+id), time.Now(),
			producer.WithKey(id), producer.WithMaxRetries(0)) // one attempt, then dead
		if err != nil {
			panic(err)
		}
	}
	ds, err := c.Pull(ctx, []topic.Topic{webhooks}, 10)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		if err := d.Nack(ctx, 0, errors.New("503 from partner")); err != nil {
			panic(err)
		}
	}

	dead, err := c.Inspector().Dead(ctx, webhooks, rmq.WithLimit(10))
	if err != nil {
		panic(err)
	}
	for _, m := range dead {
		fmt.Printf("%s: %s after %d attempt(s): %s\n", m.ID, m.Body, m.Attempts, m.LastError)
	}
	// Output:
	// hook-2: POST /orders hook-2 after 1 attempt(s): 503 from partner
	// hook-1: POST /orders hook-1 after 1 attempt(s): 503 from partner
}

// Requeue gives dead messages another chance once their cause is fixed:
// they come back as fresh messages, due now, with no failed attempts.
func ExampleInspector_Requeue() {
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

	webhooks := topic.MustNew("webhooks", topic.FixedTime, 8)
	_, err = c.Producer().SendFixedTime(ctx, webhooks, []byte("POST /orders/7"), time.Now(),
		producer.WithKey("hook-7"), producer.WithMaxRetries(0))
	if err != nil {
		panic(err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{webhooks}, 10)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		if err := d.Nack(ctx, 0, errors.New("503 from partner")); err != nil {
			panic(err)
		}
	}

	in := c.Inspector()
	n, err := in.Requeue(ctx, webhooks, "hook-7", "no-such-id")
	if err != nil {
		panic(err)
	}
	fmt.Println("requeued:", n)

	ds, err = c.Pull(ctx, []topic.Topic{webhooks}, 1, rmq.WithWait(10*time.Second))
	if err != nil || len(ds) != 1 {
		panic(fmt.Sprint("nothing pulled: ", err))
	}
	fmt.Printf("%s again: attempt %d, last error %q\n", ds[0].ID, ds[0].Attempt, ds[0].LastError)
	if err := ds[0].Ack(ctx); err != nil {
		panic(err)
	}
	// Output:
	// requeued: 1
	// hook-7 again: attempt 1, last error ""
}

// DeleteDead drops dead messages for good, bodies with them (PurgeDead
// drops a topic's whole dead queue).
func ExampleInspector_DeleteDead() {
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

	imports := topic.MustNew("imports", topic.Priority, 8)
	for _, id := range []string{"file-1", "file-2", "file-3"} {
		_, err := c.Producer().SendPriority(ctx, imports, []byte(id+".csv"), 100,
			producer.WithKey(id), producer.WithMaxRetries(0))
		if err != nil {
			panic(err)
		}
	}
	ds, err := c.Pull(ctx, []topic.Topic{imports}, 10)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		if err := d.Nack(ctx, 0, errors.New("malformed CSV")); err != nil {
			panic(err)
		}
	}

	in := c.Inspector()
	n, err := in.DeleteDead(ctx, imports, "file-1", "file-3")
	if err != nil {
		panic(err)
	}
	fmt.Println("deleted:", n)
	dead, err := in.Dead(ctx, imports)
	if err != nil {
		panic(err)
	}
	for _, m := range dead {
		fmt.Println("still dead:", m.ID)
	}
	// Output:
	// deleted: 2
	// still dead: file-2
}

// Peek lists waiting messages in the order consumers will take them,
// without taking them: earliest due first for a time-based topic.
func ExampleInspector_Peek() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	invoices := topic.MustNew("invoice-reminders", topic.FixedTime, 8)
	now := time.Now()
	for id, in := range map[string]time.Duration{"inv-1": 72 * time.Hour, "inv-2": 24 * time.Hour, "inv-3": 48 * time.Hour} {
		if _, err := p.SendFixedTime(ctx, invoices, []byte("remind "+id), now.Add(in), producer.WithKey(id)); err != nil {
			panic(err)
		}
	}

	waiting, err := rmq.NewInspector(rdb).Peek(ctx, invoices, 10)
	if err != nil {
		panic(err)
	}
	for _, m := range waiting {
		fmt.Printf("%s due in %v\n", m.ID, m.DueAt.Sub(now).Round(time.Hour))
	}
	// Output:
	// inv-2 due in 24h0m0s
	// inv-3 due in 48h0m0s
	// inv-1 due in 72h0m0s
}

// Stats counts a topic's messages: waiting (Store), of which Due may be
// delivered now, in flight (Prepare) and dead.
func ExampleInspector_Stats() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	timeouts := topic.MustNew("order-timeouts", topic.FixedTime, 16)
	for i, in := range []time.Duration{-time.Minute, time.Hour, 2 * time.Hour} {
		key := fmt.Sprintf("order-%d", i+1)
		if _, err := p.SendFixedTime(ctx, timeouts, []byte(key), time.Now().Add(in), producer.WithKey(key)); err != nil {
			panic(err)
		}
	}

	st, err := rmq.NewInspector(rdb).Stats(ctx, timeouts)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d waiting, %d due, %d in flight, %d dead, over %d slots\n",
		st.Topic.Name(), st.Store, st.Due, st.Prepare, st.Dead, len(st.Slots))
	// Output:
	// order-timeouts: 3 waiting, 1 due, 0 in flight, 0 dead, over 16 slots
}

// An Inspector needs no client: NewInspector reads the queues under a key
// prefix (the default one here), e.g. for an admin tool. Topics lists
// every topic a producer or consumer defined there.
func ExampleNewInspector() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()
	if _, err := p.SendPriority(ctx, topic.MustNew("jobs", topic.Priority, 4), []byte("rebuild index"), 40); err != nil {
		panic(err)
	}
	if _, err := p.SendRangeMerge(ctx, topic.MustNew("price-changes", topic.RangeMerge, 8), []byte("sku-1 9.99"), time.Minute); err != nil {
		panic(err)
	}

	in := rmq.NewInspector(rdb)
	topics, err := in.Topics(ctx)
	if err != nil {
		panic(err)
	}
	for _, t := range topics {
		fmt.Println(t) // name(type/slots)
	}
	// Output:
	// jobs(priority/4)
	// price-changes(rangemerge/8)
}
