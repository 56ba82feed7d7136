package rmq_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// auditLog is an rmq.Observer that prints what the client does. It embeds
// rmq.BaseObserver for the methods it does not care about, and implements
// the optional extension rmq.TopicObserver too.
type auditLog struct {
	rmq.BaseObserver
}

func (auditLog) Consumes(t topic.Topic) { fmt.Println("consumes", t.Name()) }

func (auditLog) Sent(t topic.Topic, r producer.SendResult) {
	fmt.Printf("sent to %s: %v\n", t.Name(), r)
}

func (auditLog) Delivered(m *consumer.Message) {
	fmt.Printf("delivered %s, attempt %d\n", m.ID, m.Attempt)
}

func (auditLog) Finished(m *consumer.Message, _ time.Duration, outcome consumer.Outcome, err error) {
	fmt.Printf("finished %s: %v\n", m.ID, outcome)
}

// An Observer, attached with WithObserver, is told of every send, delivery
// and outcome of a client, for metrics and tracing (x/prometheus and x/otel
// implement one). Its methods run on the client's goroutines and must not
// block; this one prints.
func ExampleObserver() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	c, err := rmq.New(rdb, rmq.WithObserver(auditLog{}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	jobs := topic.MustNew("jobs", topic.Priority, 4)
	p := c.Producer()
	if _, err := p.SendPriority(ctx, jobs, []byte("report"), 20, producer.WithKey("report-7")); err != nil {
		panic(err)
	}
	// The same id again while it waits: its priority is replaced.
	if _, err := p.SendPriority(ctx, jobs, []byte("report"), 90, producer.WithKey("report-7")); err != nil {
		panic(err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{jobs}, 1)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// sent to jobs: stored
	// sent to jobs: replaced
	// consumes jobs
	// delivered report-7, attempt 1
	// finished report-7: acked
}

// A client's middleware wraps the listener of every topic it registers,
// the first given outermost: here one logs how every delivery ended and
// the other puts a header into the handler's context.
func ExampleWithMiddleware() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()

	logOutcome := func(next consumer.MessageListener) consumer.MessageListener {
		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			err := next.OnMessage(ctx, m)
			fmt.Printf("%s/%s attempt %d: err=%v\n", m.Topic, m.ID, m.Attempt, err)
			return err
		})
	}
	type tenantKey struct{}
	withTenant := func(next consumer.MessageListener) consumer.MessageListener {
		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			return next.OnMessage(context.WithValue(ctx, tenantKey{}, m.Headers["tenant"]), m)
		})
	}
	c, err := rmq.New(rdb, rmq.WithMiddleware(logOutcome, withTenant))
	if err != nil {
		panic(err)
	}

	emails := topic.MustNew("emails", topic.FixedTime, 8)
	done := make(chan struct{})
	err = c.Register(emails, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		defer close(done)
		fmt.Printf("sending %q for tenant %v\n", m.Body, ctx.Value(tenantKey{}))
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	_, err = c.Producer().SendFixedTime(ctx, emails, []byte("welcome"), time.Now(),
		producer.WithKey("mail-1"), producer.WithHeaders(map[string]string{"tenant": "acme"}))
	if err != nil {
		panic(err)
	}
	<-done
	// Output:
	// sending "welcome" for tenant acme
	// emails/mail-1 attempt 1: err=<nil>
}

// A send hook sees every message the client's producer sends, before it is
// written, and may add headers (a tracing integration puts its context
// there); the after func it returns learns the outcome.
func ExampleWithSendHook() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()

	stamp := func(ctx context.Context, m *rmq.Outgoing) func(id string, err error) {
		m.Headers["sent-by"] = "billing"
		return func(id string, err error) { fmt.Printf("wrote %s to %s: err=%v\n", id, m.Topic.Name(), err) }
	}
	c, err := rmq.New(rdb, rmq.WithSendHook(stamp))
	if err != nil {
		panic(err)
	}
	if err := c.Start(ctx); err != nil {
		panic(err)
	}
	defer c.Close(ctx)

	invoices := topic.MustNew("invoices", topic.Priority, 4)
	if _, err := c.Producer().SendPriority(ctx, invoices, []byte("invoice 5"), 50, producer.WithKey("inv-5")); err != nil {
		panic(err)
	}
	ds, err := c.Pull(ctx, []topic.Topic{invoices}, 1)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		var hs []string
		for k, v := range d.Headers {
			hs = append(hs, k+"="+v)
		}
		fmt.Printf("pulled %s with headers %s\n", d.ID, strings.Join(hs, ","))
		if err := d.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// wrote inv-5 to invoices: err=<nil>
	// pulled inv-5 with headers sent-by=billing
}
