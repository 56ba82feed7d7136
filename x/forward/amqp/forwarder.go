package rmqamqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/forwarding"
)

// The headers every forwarded message carries besides its own: the RMQ
// message id, topic, due time (RFC 3339 UTC with milliseconds; absent for
// priority messages) and attempt. They win over a message or extra header
// of the same name. The message-id property carries the RMQ id as well.
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
	// ErrUnroutable: the broker returned the mandatory publish (312
	// NO_ROUTE: no queue bound for its routing key). The error's text
	// carries the broker's code and reason.
	ErrUnroutable = errors.New("rmqamqp: message unroutable")
	// ErrNotConfirmed: the broker nacked the publish, or the channel was
	// lost before its confirm came (the message may or may not have
	// arrived: RMQ sends it again, with the same message-id).
	ErrNotConfirmed = errors.New("rmqamqp: publish not confirmed")
	// ErrConnectionClosed: the connection is closed for good (closed by its
	// owner, or its recovery gave up).
	ErrConnectionClosed = errors.New("rmqamqp: connection closed")
	// ErrNoRecovery is returned by Forwarder for a connection dialed
	// without Config.Recovery: it could not outlive a broker restart.
	ErrNoRecovery = errors.New("rmqamqp: connection without Config.Recovery")
)

// Closer is implemented by the listener Forwarder returns.
type Closer interface {
	// Close refuses further messages (OnMessage returns ErrClosed), waits
	// until every publish it sent was confirmed or failed, also those
	// whose OnMessage gave up after the publish timeout, or until ctx
	// ends, and closes its channel. Call it after the rmq.Client's Close
	// and before the connection's.
	Close(ctx context.Context) error
}

// Option configures a forwarder.
type Option func(*forwarding.Config)

// WithHeaders adds headers to each forwarded message: f's map wins over the
// message's own headers, the rmq-* headers win over both. f must be safe
// for concurrent use.
func WithHeaders(f func(*consumer.Message) map[string]string) Option {
	return func(c *forwarding.Config) { c.Headers = f }
}

// WithPublishTimeout bounds one forward, from waiting for a window slot (or
// for the connection to come back) to the broker's confirm (default 5 s);
// past it OnMessage returns an error and RMQ retries the message after its
// backoff. The handler's context can end it sooner.
func WithPublishTimeout(d time.Duration) Option {
	return func(c *forwarding.Config) { c.PublishTimeout = d }
}

// WithWindow bounds the publishes awaiting a confirm (default 256),
// counting those a timed-out OnMessage left behind; further messages wait
// for a slot. Concurrent handlers (consumer.WithConcurrency) fill it: their
// publishes share one channel with many confirms in flight.
func WithWindow(n int) Option {
	return func(c *forwarding.Config) { c.Window = n }
}

// forwarder is the listener Forwarder returns.
type forwarder struct {
	conn       *amqp.Connection
	exchange   string
	routingKey func(*consumer.Message) string
	cfg        forwarding.Config
	win        *forwarding.Window

	// lock serializes publishes and guards cur; a channel so that waiting
	// for it honours a context.
	lock    chan struct{}
	cur     *session
	retired []*session  // gone sessions whose channels may still be open
	lost    *amqp.Error // why the last retired session was lost

	state connState
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// Forwarder returns a listener that publishes each message to exchange with
// routing key routingKey(m), mandatory and persistent, on a confirm-mode
// channel of its own on conn, and returns nil (RMQ acks) only once the
// broker confirmed the publish and did not return it; see the package
// documentation. conn must have been dialed with Config.Recovery
// (ErrNoRecovery otherwise). The exchange is checked to exist (the
// default exchange "" always does).
func Forwarder(conn *amqp.Connection, exchange string, routingKey func(*consumer.Message) string, opts ...Option) (consumer.MessageListener, error) {
	cfg := forwarding.DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case conn == nil:
		return nil, fmt.Errorf("rmqamqp: %w: nil connection", consumer.ErrInvalidOption)
	case routingKey == nil:
		return nil, fmt.Errorf("rmqamqp: %w: nil routing key function", consumer.ErrInvalidOption)
	case !conn.IsRecoveryEnabled():
		return nil, ErrNoRecovery
	}
	if err := cfg.Validate("rmqamqp"); err != nil {
		return nil, err
	}
	f := &forwarder{
		conn: conn, exchange: exchange, routingKey: routingKey, cfg: cfg,
		win: forwarding.NewWindow(cfg.Window), lock: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	s, err := openSession(conn, cfg.Window)
	if err != nil {
		return nil, fmt.Errorf("rmqamqp: open channel: %w", err)
	}
	if exchange != "" {
		// A passive declare that fails closes the channel: check on one
		// of its own.
		chk, err := conn.Channel()
		if err == nil {
			// A failed declare has the server close the channel; closing
			// it from here too can block for good on amqp091-go's lock
			// while it handles the server's close (seen once in a test run).
			if err = chk.ExchangeDeclarePassive(exchange, "", false, false, false, false, nil); err == nil {
				_ = chk.Close()
			}
		}
		if err != nil {
			_ = s.ch.Close()
			return nil, fmt.Errorf("rmqamqp: exchange %q: %w", exchange, err)
		}
	}
	f.cur = s
	f.state.init(conn)
	return f, nil
}

// OnMessage forwards m; see Forwarder.
func (f *forwarder) OnMessage(ctx context.Context, m *consumer.Message) error {
	key := f.routingKey(m)
	fail := func(err error) error {
		return fmt.Errorf("rmqamqp: publish %s to exchange %q key %q: %w", m.ID, f.exchange, key, err)
	}
	h := f.cfg.HeadersOf(m)
	headers := make(amqp.Table, len(h))
	for k, v := range h {
		if len(k) > 255 {
			return consumer.SkipRetry(fail(fmt.Errorf("header name of %d bytes (AMQP allows 255)", len(k))))
		}
		headers[k] = v
	}
	if len(key) > 255 {
		return consumer.SkipRetry(fail(fmt.Errorf("routing key of %d bytes (AMQP allows 255)", len(key))))
	}
	pub := amqp.Publishing{
		Headers:      headers,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Body:         m.Body,
	}

	ctx, cancel := context.WithTimeoutCause(ctx, f.cfg.PublishTimeout,
		fmt.Errorf("no confirm within %v", f.cfg.PublishTimeout))
	defer cancel()
	if err := f.win.Acquire(ctx); err != nil {
		return fail(err)
	}
	s, dc, err := f.publish(ctx, key, pub)
	if err != nil {
		f.win.Release()
		return fail(err)
	}
	rk := keyOf(m.ID, headers)
	select {
	case <-dc.Done():
		err := f.outcome(s, dc, rk)
		f.win.Release()
		if err != nil {
			return fail(err)
		}
		return nil
	case <-ctx.Done():
		// The slot stays taken until the broker answers; the return, if
		// any, is claimed so it does not linger.
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.win.Release()
			select {
			case <-dc.Done():
				_ = f.outcome(s, dc, rk)
			case <-f.stop:
			}
		}()
		return fail(context.Cause(ctx))
	}
}

// outcome is what a resolved confirm means.
func (f *forwarder) outcome(s *session, dc *amqp.DeferredConfirmation, rk returnKey) error {
	if !dc.Acked() {
		if why := s.why(); why != nil {
			return fmt.Errorf("%w: broker nacked it, or the channel was lost (%v)", ErrNotConfirmed, why)
		}
		return fmt.Errorf("%w: broker nacked it", ErrNotConfirmed)
	}
	if r, ok := s.claimReturn(rk); ok {
		return fmt.Errorf("%w: %d %s", ErrUnroutable, r.ReplyCode, r.ReplyText)
	}
	return nil
}

// pollEvery is how often a publish waiting for the channel to come back
// looks at it again.
const pollEvery = 25 * time.Millisecond

// publish sends pub on the session, waiting (within ctx) while the channel
// or the connection recovers, and opening a new channel when the old one
// is gone for good.
func (f *forwarder) publish(ctx context.Context, key string, pub amqp.Publishing) (*session, *amqp.DeferredConfirmation, error) {
	for {
		select {
		case f.lock <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
		s, losses, err := f.sessionLocked()
		if err != nil || s == nil {
			<-f.lock
			if err != nil {
				return nil, nil, err
			}
			select {
			case <-time.After(pollEvery):
				continue
			case <-ctx.Done():
				err := context.Cause(ctx)
				if why := f.lastLoss(); why != nil {
					err = fmt.Errorf("%w (waiting for the channel to recover from: %v)", err, why)
				}
				return nil, nil, err
			}
		}
		dc, err := s.ch.PublishWithDeferredConfirm(f.exchange, key, true, false, pub)
		open, _ := f.state.get()
		if _, after, _ := s.poll(open); after != losses {
			// The channel was lost around the publish: it may have gone
			// out on the channel amqp091 was reopening, taking a delivery
			// tag the broker will not confirm. Nothing more goes out on
			// this channel; RMQ sends the message again.
			s.retire()
			<-f.lock
			return nil, nil, fmt.Errorf("%w: channel lost during the publish (%v)", ErrNotConfirmed, s.why())
		}
		<-f.lock
		if err != nil {
			return nil, nil, err
		}
		return s, dc, nil
	}
}

// sessionLocked returns the session to publish on and its loss count, or
// nil while the channel or the connection recovers. Called with f.lock.
func (f *forwarder) sessionLocked() (*session, int, error) {
	open, gone := f.state.get()
	if gone != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrConnectionClosed, gone)
	}
	if f.cur != nil {
		usable, losses, over := f.cur.poll(open)
		if usable {
			return f.cur, losses, nil
		}
		if !over {
			return nil, 0, nil // amqp091 is reopening it
		}
		// Closed for good: amqp091 gave up on it, or we retired it. A
		// retired channel that is still open is left to the connection:
		// closing a channel while its connection is down would leave it
		// registered and fail every later connection recovery (amqp091
		// v1.16), so only Close, with the connection open, closes it.
		f.lost = f.cur.why()
		if !f.cur.ch.IsClosed() {
			f.retired = append(f.retired, f.cur)
		}
		f.cur = nil
	}
	if !open || f.conn.IsClosed() {
		return nil, 0, nil
	}
	s, err := openSession(f.conn, f.cfg.Window)
	if err != nil {
		return nil, 0, fmt.Errorf("open channel: %w", err)
	}
	f.cur = s
	return s, 0, nil
}

// lastLoss is the broker's reason of the current channel's last loss.
func (f *forwarder) lastLoss() error {
	select {
	case f.lock <- struct{}{}:
		defer func() { <-f.lock }()
	default:
		return nil
	}
	if f.cur != nil {
		if why := f.cur.why(); why != nil {
			return why
		}
	}
	if f.lost != nil {
		return f.lost
	}
	return nil
}

// Close implements Closer.
func (f *forwarder) Close(ctx context.Context) error {
	err := f.win.Close(ctx)
	f.once.Do(func() {
		close(f.stop)
		f.lock <- struct{}{}
		open, _ := f.state.get()
		for _, s := range append(f.retired, f.cur) {
			if s == nil {
				continue
			}
			// Only a channel that is open, on an open connection, may be
			// closed; see sessionLocked.
			if open && !f.conn.IsClosed() && !s.ch.IsClosed() {
				_ = s.ch.Close()
			}
		}
		f.cur, f.retired = nil, nil
		<-f.lock
	})
	f.wg.Wait()
	if err != nil {
		return fmt.Errorf("rmqamqp: close: %w", err)
	}
	return nil
}

// connState follows the connection's recovery: a new channel is opened
// only while the connection is open (one opened during amqp091's reconnect
// handshake would interleave with it). amqp091's state changes are taken
// in when asked; only the latest matters.
type connState struct {
	events chan *amqp.StateChanged
	mu     sync.Mutex
	open   bool
	gone   error // set once the connection is closed for good
}

func (c *connState) init(conn *amqp.Connection) {
	c.open = !conn.IsClosed()
	// amqp091 queues up to 50 changes per listener and hands them over
	// from a goroutine of its own, so an unread listener costs it a
	// waiting goroutine, never a blocked connection.
	c.events = make(chan *amqp.StateChanged, 64)
	conn.NotifyStateChange(c.events)
}

func (c *connState) get() (open bool, gone error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.gone == nil {
		select {
		case ev, ok := <-c.events:
			switch {
			case !ok:
				c.gone = amqp.ErrClosed
			case ev.To == amqp.StateClosed:
				c.gone = ev.Err
				if c.gone == nil {
					c.gone = amqp.ErrClosed
				}
			}
			c.open = ok && ev.To == amqp.StateOpen
			continue
		default:
		}
		break
	}
	return c.open && c.gone == nil, c.gone
}

// ForwardsToBroker marks the listener as a forwarder: the client counts
// its acked deliveries as forwarded in the topic's history.
func (*forwarder) ForwardsToBroker() {}
