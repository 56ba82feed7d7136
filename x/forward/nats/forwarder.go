package rmqnats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/forwarding"
)

// The headers every forwarded message carries besides its own: the RMQ
// message id, topic, due time (RFC 3339 UTC with milliseconds; absent for
// priority messages) and attempt. They win over a message or extra header
// of the same name. Nats-Msg-Id carries the deduplication id as well.
const (
	HeaderID      = forwarding.HeaderID
	HeaderTopic   = forwarding.HeaderTopic
	HeaderDueAt   = forwarding.HeaderDueAt
	HeaderAttempt = forwarding.HeaderAttempt
)

// DueAtLayout is the time layout of HeaderDueAt.
const DueAtLayout = forwarding.DueAtLayout

var (
	// ErrClosed is returned by the listener's OnMessage after Close.
	ErrClosed = forwarding.ErrClosed
	// ErrInvalidHeader: a header NATS cannot carry (a name with a colon,
	// space or control character, a value with CR or LF). The message goes
	// to the dead queue at once: no retry can send it.
	ErrInvalidHeader = errors.New("rmqnats: header NATS cannot carry")
)

// Closer is implemented by the listener Forwarder returns.
type Closer interface {
	// Close refuses further messages (OnMessage returns ErrClosed) and
	// waits until every publish it sent was answered by JetStream, also
	// those whose OnMessage gave up after the publish timeout, or until
	// ctx ends. Call it after the rmq.Client's Close.
	Close(ctx context.Context) error
}

// Option configures a forwarder.
type Option func(*config)

type config struct {
	forwarding.Config
	msgID func(*consumer.Message) string
}

// WithHeaders adds headers to each forwarded message: f's map wins over the
// message's own headers, the rmq-* headers win over both. f must be safe
// for concurrent use.
func WithHeaders(f func(*consumer.Message) map[string]string) Option {
	return func(c *config) { c.Headers = f }
}

// WithPublishTimeout bounds one forward, from waiting for a window slot to
// JetStream's PubAck (default 5 s); past it OnMessage returns an error and
// RMQ retries the message after its backoff. The handler's context (a
// handler timeout, a lost lease) can end it sooner.
func WithPublishTimeout(d time.Duration) Option {
	return func(c *config) { c.PublishTimeout = d }
}

// WithWindow bounds the publishes awaiting a PubAck (default 256), counting
// those a timed-out OnMessage left behind; further messages wait for a
// slot. Concurrent handlers (consumer.WithConcurrency) fill the window:
// their publishes are pipelined on the one connection.
func WithWindow(n int) Option {
	return func(c *config) { c.Window = n }
}

// WithMsgID picks the deduplication id (Nats-Msg-Id) of a message; the
// default is the RMQ message id. JetStream drops a second message with
// the same id within the stream's duplicate window (2 minutes by default),
// so a message re-sent under the same RMQ id after it was forwarded (the
// default id is derived from the body) is dropped when it comes due within
// the window. When that can happen, include the first-send time, which
// stays the same across the retries of one message:
//
//	rmqnats.WithMsgID(func(m *consumer.Message) string {
//		return m.ID + "@" + strconv.FormatInt(m.FirstSentAt.UnixMilli(), 10)
//	})
func WithMsgID(f func(*consumer.Message) string) Option {
	return func(c *config) { c.msgID = f }
}

// forwarder is the listener Forwarder returns.
type forwarder struct {
	js      jetstream.JetStream
	subject func(*consumer.Message) string
	cfg     config
	win     *forwarding.Window

	// Publishes whose OnMessage timed out are watched by a goroutine each
	// until JetStream answers, so their window slot is held until then.
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// Forwarder returns a listener that publishes each message to JetStream on
// the subject subject(m) and returns nil (RMQ acks) only once JetStream's
// PubAck came back, a duplicate's included; see the package documentation.
// It panics when js or subject is nil or an option is out of range: a
// program error, caught before any message is taken.
func Forwarder(js jetstream.JetStream, subject func(*consumer.Message) string, opts ...Option) consumer.MessageListener {
	cfg := config{Config: forwarding.DefaultConfig(), msgID: func(m *consumer.Message) string { return m.ID }}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case js == nil:
		panic("rmqnats: Forwarder with a nil JetStream")
	case subject == nil:
		panic("rmqnats: Forwarder with a nil subject function")
	case cfg.msgID == nil:
		panic("rmqnats: WithMsgID(nil)")
	}
	if err := cfg.Validate("rmqnats"); err != nil {
		panic(err)
	}
	return &forwarder{js: js, subject: subject, cfg: cfg, win: forwarding.NewWindow(cfg.Window), stop: make(chan struct{})}
}

// OnMessage forwards m; see Forwarder.
func (f *forwarder) OnMessage(ctx context.Context, m *consumer.Message) error {
	subject := f.subject(m)
	if subject == "" || strings.ContainsAny(subject, " \t\r\n") {
		return consumer.SkipRetry(fmt.Errorf("rmqnats: message %s: invalid subject %q", m.ID, subject))
	}
	msg := &nats.Msg{Subject: subject, Data: m.Body, Header: nats.Header{}}
	for k, v := range f.cfg.HeadersOf(m) {
		if err := checkHeader(k, v); err != nil {
			return consumer.SkipRetry(fmt.Errorf("rmqnats: message %s: %w", m.ID, err))
		}
		msg.Header.Set(k, v)
	}
	fail := func(err error) error { return fmt.Errorf("rmqnats: publish %s to %s: %w", m.ID, subject, err) }

	ctx, cancel := context.WithTimeoutCause(ctx, f.cfg.PublishTimeout,
		fmt.Errorf("no PubAck within %v", f.cfg.PublishTimeout))
	defer cancel()
	if err := f.win.Acquire(ctx); err != nil {
		return fail(err)
	}
	// A full client-side window (jetstream.WithPublishAsyncMaxPending)
	// stalls the call; it may stall as long as we wait.
	stall := time.Until(deadline(ctx))
	paf, err := f.js.PublishMsgAsync(msg, jetstream.WithMsgID(f.cfg.msgID(m)), jetstream.WithStallWait(max(stall, time.Millisecond)))
	if err != nil {
		f.win.Release()
		if errors.Is(err, nats.ErrMaxPayload) {
			return consumer.SkipRetry(fail(err))
		}
		return fail(err)
	}
	select {
	case <-paf.Ok():
		f.win.Release()
		return nil
	case err := <-paf.Err():
		f.win.Release()
		return fail(err)
	case <-ctx.Done():
		f.watch(paf)
		return fail(context.Cause(ctx))
	}
}

// watch holds paf's window slot until JetStream answers it (nats.go fails
// it on a disconnect, and after jetstream.WithPublishAsyncTimeout) or Close
// stops waiting.
func (f *forwarder) watch(paf jetstream.PubAckFuture) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.win.Release()
		select {
		case <-paf.Ok():
		case <-paf.Err():
		case <-f.stop:
		}
	}()
}

// Close implements Closer.
func (f *forwarder) Close(ctx context.Context) error {
	err := f.win.Close(ctx)
	f.stopped.Do(func() { close(f.stop) })
	f.wg.Wait()
	if err != nil {
		return fmt.Errorf("rmqnats: close: %w", err)
	}
	return nil
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// checkHeader refuses what the NATS header block cannot carry: it is
// written as "Name: value\r\n" lines.
func checkHeader(k, v string) error {
	if k == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidHeader)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c == ':' || c >= 0x7f {
			return fmt.Errorf("%w: name %q", ErrInvalidHeader, k)
		}
	}
	if strings.ContainsAny(v, "\r\n") {
		return fmt.Errorf("%w: value of %q has a line break", ErrInvalidHeader, k)
	}
	return nil
}

// ForwardsToBroker marks the listener as a forwarder: the client counts
// its acked deliveries as forwarded in the topic's history.
func (*forwarder) ForwardsToBroker() {}
