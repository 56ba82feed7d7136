package main

// forward.go runs --forward: a queue whose jobs go to a broker when they
// come due. The forwarder (x/forward/{nats,amqp,kafka}) is the listener of
// the queue's topic on the pool's RMQ client, so the library's lease,
// retries (the job's tries), backoff and dead letter cover a broker that is
// down or refuses; rmqd adds the broker connection, the counts and the
// last error that GET /forwards and the dashboard show.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/topic"
)

// forwardConcurrency is how many jobs of one forwarded queue are on their
// way to the broker at once: each handler waits for its own confirm, so
// concurrent handlers are what pipelines the publishes (the forwarders'
// window is 256 as well, so no handler waits for a window slot).
const forwardConcurrency = 256

// forward is one running --forward.
type forward struct {
	spec  forwardSpec
	topic topic.Topic
	log   *slog.Logger
	// redact hides the passwords rmqd knows in an error's text.
	redact func(string) string

	// fw is the broker's forwarder; closeFw waits for the publishes it
	// left behind, closeConn ends the broker connection.
	fw        consumer.MessageListener
	closeFw   func(context.Context) error
	closeConn func()

	forwarded, failed atomic.Uint64
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

// openForward connects to the broker of spec (forward_brokers.go) and
// checks that its target exists: a JetStream stream that captures the
// subject, the AMQP exchange, the Kafka topic. Either missing fails the
// start: at start that is a wrong host, port, password or name more often
// than an outage, and an error says so at once. Once started, a broker
// that goes away is ridden out (reconnects; the jobs' retries).
func openForward(ctx context.Context, spec forwardSpec, log *slog.Logger, redact func(string) string) (*forward, error) {
	var (
		b   broker
		err error
	)
	log = log.With("forward", spec.name(), "target", spec.target())
	switch spec.kind {
	case "nats":
		b, err = openNATS(ctx, spec, log)
	case "amqp":
		b, err = openAMQP(ctx, spec)
	case "kafka":
		b, err = openKafka(ctx, spec)
	default:
		err = fmt.Errorf("unknown kind %q", spec.kind)
	}
	if err != nil {
		return nil, fmt.Errorf("forward %s to %s: %s", spec.name(), spec.target(), redact(err.Error()))
	}
	return &forward{spec: spec, log: log, redact: redact, fw: b.fw, closeFw: b.closeFw, closeConn: b.closeConn}, nil
}

// OnMessage forwards one job and counts the outcome. The job is handed
// over as it was published: rmqd's marker of an empty body is undone.
func (f *forward) OnMessage(ctx context.Context, m *consumer.Message) error {
	err := f.fw.OnMessage(ctx, publishedMessage(m))
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
	f.failed.Add(1)
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

// publishedMessage undoes storedBody (engine.go): an empty body is stored
// as one space with the emptyHeader marker, which no broker should see (a
// NATS header name cannot even hold its colon). m itself is not changed.
func publishedMessage(m *consumer.Message) *consumer.Message {
	if _, ok := m.Headers[emptyHeader]; !ok {
		return m
	}
	c := *m
	c.Body = []byte{}
	c.Headers = make(map[string]string, len(m.Headers)-1)
	for k, v := range m.Headers {
		if k != emptyHeader {
			c.Headers[k] = v
		}
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	return &c
}

// close waits for the publishes the forwarder left behind, then ends the
// broker connection. The pool's RMQ client must be closed first: it waits
// for the forwards in progress.
func (f *forward) close(ctx context.Context) error {
	err := f.closeFw(ctx)
	f.closeConn()
	if err != nil {
		return fmt.Errorf("forward %s: %w", f.spec.name(), err)
	}
	return nil
}

// forwardStatus is one forward as GET /forwards answers it. The counts are
// this process's since it started; other rmqd processes forwarding the
// same queue count their own.
type forwardStatus struct {
	Pool        string     `json:"pool"`
	Namespace   string     `json:"namespace"`
	Queue       string     `json:"queue"`
	Target      string     `json:"target"`
	Forwarded   uint64     `json:"forwarded"`
	Failed      uint64     `json:"failed"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

func (f *forward) status() forwardStatus {
	st := forwardStatus{Pool: f.spec.pool, Namespace: f.spec.ns, Queue: f.spec.queue, Target: f.spec.target(),
		Forwarded: f.forwarded.Load(), Failed: f.failed.Load()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastErr != "" {
		at := f.lastErrAt.UTC()
		st.LastError, st.LastErrorAt = f.lastErr, &at
	}
	return st
}

// openForwards opens the forwards of one pool and registers each on the
// pool's client, which must not have started (Register after Start is
// refused). A forwarded queue keeps the type it has; a queue never
// published to becomes a FixedTime queue, as a first publish would make
// it. On an error nothing stays open.
func (p *pool) openForwards(ctx context.Context, specs []forwardSpec, log *slog.Logger, redact func(string) string) error {
	for _, spec := range specs {
		t, err := p.publishTopic(ctx, spec.ns, spec.queue, 0)
		if err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.name(), err)
		}
		f, err := openForward(ctx, spec, log.With("pool", p.name), redact)
		if err != nil {
			_ = p.closeForwards(ctx)
			return err
		}
		f.topic = t
		p.forwards = append(p.forwards, f)
		if err := p.client.Register(t, f, consumer.WithConcurrency(forwardConcurrency)); err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.name(), err)
		}
	}
	return nil
}

// closeForwards closes every forward of the pool, after its client.
func (p *pool) closeForwards(ctx context.Context) error {
	var errs []error
	for _, f := range p.forwards {
		errs = append(errs, f.close(ctx))
	}
	p.forwards = nil
	return errors.Join(errs...)
}

// forwardOf returns the forward of queue q of namespace ns, or nil.
func (p *pool) forwardOf(ns, q string) *forward {
	for _, f := range p.forwards {
		if f.spec.ns == ns && f.spec.queue == q {
			return f
		}
	}
	return nil
}

// forwardStatuses lists every forward of every pool (pool "" = all), in
// the order of the pools' names and of the command line.
func (s *service) forwardStatuses(pool string) []forwardStatus {
	out := []forwardStatus{}
	for _, name := range s.poolNames {
		if pool != "" && name != pool {
			continue
		}
		for _, f := range s.pools[name].forwards {
			out = append(out, f.status())
		}
	}
	return out
}

// dashboardForwards are the default pool's forwards for the dashboard,
// whose pages show that pool.
func (s *service) dashboardForwards(context.Context) []dashboard.Forward {
	var out []dashboard.Forward
	for _, f := range s.pools[defaultPool].forwards {
		st := f.status()
		d := dashboard.Forward{Topic: f.topic.Name(), Target: st.Target, Forwarded: st.Forwarded, Failed: st.Failed, LastError: st.LastError}
		if st.LastErrorAt != nil {
			d.LastErrorAt = *st.LastErrorAt
		}
		out = append(out, d)
	}
	return out
}

// listForwards is GET /forwards[?pool=]: every forward of this process
// with its target (no password), counts and last error. An unknown pool
// is 400 "the pool was not exists", as on the token routes.
func (s *service) listForwards(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if _, ok := s.adminPool(w, pool); !ok {
			return
		}
	}
	writeJSON(w, http.StatusOK, s.forwardStatuses(pool))
}

// errForwarded is the 409 text of a consume from a forwarded queue.
const errForwarded = "queue is forwarded to a broker: consume it there"

// refuseForwarded wraps the consume route: a consume that names a queue
// this process forwards is refused (409), since a job it took would not
// reach the broker. Without forwards the route is served as it is.
func (s *service) refuseForwarded(h queueHandler) queueHandler {
	forwarded := false
	for _, p := range s.pools {
		forwarded = forwarded || len(p.forwards) > 0
	}
	if !forwarded {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, qr *queueReq) {
		if len(qr.pool.forwards) > 0 && slices.ContainsFunc(consumeQueues(qr.q), func(q string) bool {
			return qr.pool.forwardOf(qr.ns, q) != nil
		}) {
			writeError(w, http.StatusConflict, errForwarded)
			return
		}
		h(w, r, qr)
	}
}
