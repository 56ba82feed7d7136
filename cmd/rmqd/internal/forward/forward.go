package forward

// forward.go runs --forward: a queue whose jobs go to a broker when they
// come due. The forwarder (x/forward/{nats,amqp,kafka}) is the listener of
// the queue's topic on the pool's RMQ client, so the library's lease,
// retries (the job's tries), backoff and dead letter cover a broker that is
// down or refuses; rmqd adds the broker connection, the counts and the
// last error that GET /forwards and the dashboard show.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// Concurrency is how many jobs of one forwarded queue are on their
// way to the broker at once: each handler waits for its own confirm, so
// concurrent handlers are what pipelines the publishes (the forwarders'
// window is 256 as well, so no handler waits for a window slot).
const Concurrency = 256

// Forward is one running --forward.
type Forward struct {
	Spec  Spec
	Topic topic.Topic
	log   *slog.Logger
	// redact hides the passwords rmqd knows in an error's text.
	redact func(string) string

	// fw is the broker's forwarder; closeFw waits for the publishes it
	// left behind, closeConn ends the broker connection.
	fw        consumer.MessageListener
	closeFw   func(context.Context) error
	closeConn func()

	forwarded, Failed atomic.Uint64
	mu                sync.Mutex
	lastErr           string
	lastErrAt         time.Time
	failing           bool // the last forward failed: logged once per streak
}

// broker is what opening a forward's broker gives: the forwarder, how to
// close it and the connection.
type broker struct {
	fw        consumer.MessageListener
	closeFw   func(context.Context) error
	closeConn func()
}

// OpenForward connects to the broker of spec (forward_brokers.go) and
// checks that its target exists: a JetStream stream that captures the
// subject, the AMQP exchange, the Kafka topic. Either missing fails the
// start: at start that is a wrong host, port, password or name more often
// than an outage, and an error says so at once. Once started, a broker
// that goes away is ridden out (reconnects; the jobs' retries).
func OpenForward(ctx context.Context, spec Spec, log *slog.Logger, redact func(string) string) (*Forward, error) {
	var (
		b   broker
		err error
	)
	log = log.With("forward", spec.Name(), "target", spec.Target())
	switch spec.Kind {
	case "nats":
		b, err = openNATS(ctx, spec, log)
	case "amqp":
		b, err = openAMQP(ctx, spec)
	case "kafka":
		b, err = openKafka(ctx, spec)
	default:
		err = fmt.Errorf("unknown kind %q", spec.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("forward %s to %s: %s", spec.Name(), spec.Target(), redact(err.Error()))
	}
	return &Forward{Spec: spec, log: log, redact: redact, fw: b.fw, closeFw: b.closeFw, closeConn: b.closeConn}, nil
}

// OnMessage forwards one job and counts the outcome. The job is handed
// over as it was published: rmqd's marker of an empty body is undone.
func (f *Forward) OnMessage(ctx context.Context, m *consumer.Message) error {
	err := f.fw.OnMessage(ctx, PublishedMessage(m))
	if err == nil {
		f.forwarded.Add(1)
		f.mu.Lock()
		recovered := f.failing
		f.failing = false
		f.mu.Unlock()
		if recovered {
			f.log.InfoContext(ctx, "rmqd: forward works again")
		}
		return nil
	}
	f.Failed.Add(1)
	msg := f.redact(err.Error())
	f.mu.Lock()
	first := !f.failing
	f.failing, f.lastErr, f.lastErrAt = true, msg, time.Now()
	f.mu.Unlock()
	if first {
		// Once per streak of failures: a broker that is down fails every
		// job, and each is retried after the job's backoff (or dead when
		// it has no try left).
		f.log.WarnContext(ctx, "rmqd: forward failed; jobs are retried while they have tries left", "err", msg)
	}
	return err
}

// PublishedMessage undoes storedBody (../pull/engine.go): an empty body is stored
// as one space with the emptyHeader marker, which no broker should see (a
// NATS header name cannot even hold its colon). m itself is not changed.
func PublishedMessage(m *consumer.Message) *consumer.Message {
	if _, ok := m.Headers[names.EmptyHeader]; !ok {
		return m
	}
	c := *m
	c.Body = []byte{}
	c.Headers = make(map[string]string, len(m.Headers)-1)
	for k, v := range m.Headers {
		if k != names.EmptyHeader {
			c.Headers[k] = v
		}
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	return &c
}

// Close waits for the publishes the forwarder left behind, then ends the
// broker connection. The pool's RMQ client must be closed first: it waits
// for the forwards in progress.
func (f *Forward) Close(ctx context.Context) error {
	err := f.closeFw(ctx)
	f.closeConn()
	if err != nil {
		return fmt.Errorf("forward %s: %w", f.Spec.Name(), err)
	}
	return nil
}

// Status is one forward as GET /forwards answers it. The counts are
// this process's since it started; other rmqd processes forwarding the
// same queue count their own.
type Status struct {
	Pool        string     `json:"pool"`
	Namespace   string     `json:"namespace"`
	Queue       string     `json:"queue"`
	Target      string     `json:"target"`
	Forwarded   uint64     `json:"forwarded"`
	Failed      uint64     `json:"failed"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

func (f *Forward) Status() Status {
	st := Status{Pool: f.Spec.Pool, Namespace: f.Spec.Ns, Queue: f.Spec.Queue, Target: f.Spec.Target(),
		Forwarded: f.forwarded.Load(), Failed: f.Failed.Load()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastErr != "" {
		at := f.lastErrAt.UTC()
		st.LastError, st.LastErrorAt = f.lastErr, &at
	}
	return st
}
