package producer_test

import (
	"context"
	"fmt"
	"sync/atomic"
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

// Range-merge messages collapse repeats: every send of one key within the
// window merges into the first, and the one delivery, due a window after
// the first send, carries the latest body. Here a burst of price changes
// becomes one update of the search index.
func ExampleProducer_SendRangeMerge() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	prices := topic.MustNew("price-changes", topic.RangeMerge, 8)
	var deliveries atomic.Int32
	latest := make(chan string, 1)
	err = c.Register(prices, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		deliveries.Add(1)
		latest <- string(m.Body)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}

	for _, price := range []string{"9.99", "9.49", "8.99"} {
		id, err := c.Producer().SendRangeMerge(ctx, prices, []byte("sku-42 "+price), time.Second,
			producer.WithKey("sku-42"))
		if err != nil {
			panic(err)
		}
		fmt.Println("sent", id, price)
	}
	fmt.Println("delivered:", <-latest)
	if err := c.Close(ctx); err != nil { // waits for the handlers
		panic(err)
	}
	fmt.Println("deliveries:", deliveries.Load())
	// Output:
	// sent sku-42 9.99
	// sent sku-42 9.49
	// sent sku-42 8.99
	// delivered: sku-42 8.99
	// deliveries: 1
}

// Priority messages are delivered highest priority first; a message sent
// again while it waits takes its new priority.
func ExampleProducer_SendPriority() {
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

	// One slot: one order for the whole topic.
	jobs := topic.MustNew("jobs", topic.Priority, 1)
	p := c.Producer()
	send := func(key string, priority int64) {
		if _, err := p.SendPriority(ctx, jobs, []byte(key), priority, producer.WithKey(key)); err != nil {
			panic(err)
		}
	}
	send("nightly-report", 20)
	send("password-reset", 90)
	send("thumbnail", 50)
	send("nightly-report", 95) // the CEO asked for it: moves to the front

	ds, err := c.Pull(ctx, []topic.Topic{jobs}, 10)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Println(d.Priority, d.ID)
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// 95 nightly-report
	// 90 password-reset
	// 50 thumbnail
}

// Fixed-time messages are due at an exact instant and never delivered
// before it; sending the same id again moves it (last write wins).
func ExampleProducer_SendFixedTime() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	timeouts := topic.MustNew("order-timeouts", topic.FixedTime, 16)
	type delivery struct {
		id     string
		onTime bool
	}
	got := make(chan delivery, 1)
	var at time.Time
	err = c.Register(timeouts, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		got <- delivery{m.ID, !time.Now().Before(at)}
		return nil
	}))
	if err != nil {
		panic(err)
	}

	// Due in an hour, then moved to 300 ms from now (before Start, so the
	// listener cannot run before at is set).
	p := c.Producer()
	if _, err := p.SendFixedTime(ctx, timeouts, []byte("cancel"), time.Now().Add(time.Hour), producer.WithKey("order-7")); err != nil {
		panic(err)
	}
	at = time.Now().Add(300 * time.Millisecond)
	if _, err := p.SendFixedTime(ctx, timeouts, []byte("cancel"), at, producer.WithKey("order-7")); err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	d := <-got
	fmt.Printf("%s delivered, not before its time: %v\n", d.id, d.onTime)
	// Output:
	// order-7 delivered, not before its time: true
}

// Remove takes a message back wherever it is and says where it found it:
// an order paid in time removes its timeout.
func ExampleProducer_Remove() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb) // never started: only its producer is used
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	timeouts := topic.MustNew("order-timeouts", topic.FixedTime, 16)
	id, err := p.SendFixedTime(ctx, timeouts, []byte("cancel order-7"), time.Now().Add(30*time.Minute),
		producer.WithKey("order-7"))
	if err != nil {
		panic(err)
	}
	for range 2 {
		removed, err := p.Remove(ctx, timeouts, id)
		if err != nil {
			panic(err)
		}
		fmt.Println(id, removed)
	}
	// Output:
	// order-7 removed waiting
	// order-7 not found
}

// Without WithKey a message's id is derived from its body, so identical
// bodies are one message: sent twice, a range-merge message merges.
func ExampleBodyID() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	refresh := topic.MustNew("cache-refresh", topic.RangeMerge, 4)
	body := []byte(`{"page":"/pricing"}`)
	a, err := p.SendRangeMerge(ctx, refresh, body, time.Minute)
	if err != nil {
		panic(err)
	}
	b, err := p.SendRangeMerge(ctx, refresh, body, time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println("id:", a, "=", producer.BodyID(body))
	fmt.Println("second send, same id:", a == b)
	st, err := c.Inspector().Stats(ctx, refresh)
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting:", st.Store)
	// Output:
	// id: reARW7DD_xoG = reARW7DD_xoG
	// second send, same id: true
	// waiting: 1
}

// A send can carry headers, which the listener (or middleware) reads from
// the message.
func ExampleWithHeaders() {
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

	emails := topic.MustNew("emails", topic.Priority, 4)
	_, err = c.Producer().SendPriority(ctx, emails, []byte("your invoice"), 40,
		producer.WithKey("mail-9"), producer.WithHeaders(map[string]string{"tenant": "acme", "locale": "de"}))
	if err != nil {
		panic(err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{emails}, 1)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Println(d.ID, d.Headers["tenant"], d.Headers["locale"])
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// mail-9 acme de
}

// A priority message may wait before it competes: WithDelay (or
// WithNotBefore) keeps it back until then, whatever its priority.
func ExampleWithDelay() {
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

	jobs := topic.MustNew("jobs", topic.Priority, 1)
	p := c.Producer()
	if _, err := p.SendPriority(ctx, jobs, []byte("retry charge"), 90, producer.WithKey("charge-3"), producer.WithDelay(300*time.Millisecond)); err != nil {
		panic(err)
	}
	if _, err := p.SendPriority(ctx, jobs, []byte("send receipt"), 20, producer.WithKey("receipt-3")); err != nil {
		panic(err)
	}
	for range 2 {
		ds, err := c.Pull(ctx, []topic.Topic{jobs}, 1, rmq.WithWait(10*time.Second))
		if err != nil || len(ds) != 1 {
			panic(fmt.Sprint("nothing pulled: ", err))
		}
		fmt.Println(ds[0].ID)
		if err := ds[0].Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// receipt-3
	// charge-3
}

// Messages with the same slot basis share a slot: in ZooKeeper mode
// (rmq.WithZooKeeper) one worker handles a slot's messages one after
// another, so all events of one order are handled in order.
func ExampleWithSlotBasis() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb)
	if err != nil {
		panic(err)
	}
	p := c.Producer()

	events := topic.MustNew("order-events", topic.FixedTime, 16)
	slots := map[int]bool{}
	for _, step := range []string{"created", "paid", "shipped"} {
		key := "order-7/" + step
		if _, err := p.SendFixedTime(ctx, events, []byte(step), time.Now(), producer.WithKey(key), producer.WithSlotBasis([]byte("order-7"))); err != nil {
			panic(err)
		}
		info, err := c.Inspector().Message(ctx, events, key)
		if err != nil {
			panic(err)
		}
		slots[info.Slot] = true
	}
	fmt.Println("slots used:", len(slots))
	// Output:
	// slots used: 1
}
