package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Outgoing is a message on its way to Redis, as a SendHook sees it.
type Outgoing struct {
	Topic topic.Topic
	Key   string // the message id: WithKey's key, else derived from the body
	Body  []byte
	// Headers are the message's headers (WithHeaders); a hook may add or
	// change entries. The limits of WithHeaders apply after every hook ran.
	Headers map[string]string
}

// SendHook is called once per message (SendBatch too), after the message
// was validated and before it is written; it may add headers (a tracing
// integration puts its context there). The returned after, if not nil, is
// called once the write ended, with the id or the error. Hooks run on the
// sending goroutine, in the order they were given, and must not block.
type SendHook func(ctx context.Context, m *Outgoing) (after func(id string, err error))

// WithSendHook adds a hook run for every message this producer sends.
func WithSendHook(h SendHook) Option {
	return func(c *config) {
		if h != nil {
			c.hooks = append(c.hooks, h)
		}
	}
}

// runHooks runs the hooks on it and returns the after functions to call.
func (p *Producer) runHooks(ctx context.Context, it *pending) []func(string, error) {
	if len(p.cfg.hooks) == 0 {
		return nil
	}
	m := &Outgoing{Topic: it.topic, Key: it.id, Body: it.body, Headers: it.job.headers}
	if m.Headers == nil {
		m.Headers = map[string]string{}
	}
	var afters []func(string, error)
	for _, h := range p.cfg.hooks {
		if a := h(ctx, m); a != nil {
			afters = append(afters, a)
		}
	}
	if len(m.Headers) > 0 {
		it.job.headers = m.Headers
	}
	return afters
}

func callAfters(afters []func(string, error), id string, err error) {
	for _, a := range afters {
		a(id, err)
	}
}

// checkJob validates the per-message options against the topic's type.
func checkJob(j jobConfig, typ topic.Type) error {
	if j.hasMaxRetries && (j.maxRetries < 0 || j.maxRetries > maxMaxRetries) {
		return fmt.Errorf("%w: %d (want 0..%d)", ErrInvalidMaxRetries, j.maxRetries, maxMaxRetries)
	}
	if j.hasTTL && (j.ttl <= 0 || j.ttl > maxRange) {
		return fmt.Errorf("%w: TTL %v", ErrInvalidExpiry, j.ttl)
	}
	if !j.expiresAt.IsZero() && (j.expiresAt.UnixMilli() <= 0 || j.expiresAt.UnixMilli() > maxOptionMs) {
		return fmt.Errorf("%w: %v out of range", ErrInvalidExpiry, j.expiresAt)
	}
	if j.timeout != 0 && (j.timeout < time.Millisecond || j.timeout > maxTimeout) {
		return fmt.Errorf("%w: %v (want 1ms..%v)", ErrInvalidTimeout, j.timeout, maxTimeout)
	}
	if (!j.notBefore.IsZero() || j.hasDelay) && typ != topic.Priority {
		return fmt.Errorf("%w: WithNotBefore and WithDelay are for priority topics, not %s", ErrTypeMismatch, typ)
	}
	if j.hasDelay && (j.delay < 0 || j.delay > maxRange) {
		return fmt.Errorf("%w: delay %v", ErrInvalidTime, j.delay)
	}
	if !j.notBefore.IsZero() {
		ms, err := fixedScore(j.notBefore)
		if err != nil {
			return err
		}
		if ms > maxOptionMs {
			return fmt.Errorf("%w: not before %v out of range", ErrInvalidTime, j.notBefore)
		}
	}
	return checkHeaders(j.headers)
}

func checkHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return fmt.Errorf("%w: %d headers (limit %d)", ErrInvalidHeaders, len(h), MaxHeaders)
	}
	for k, v := range h {
		if len(k) == 0 || len(k) > MaxHeaderKeyLength {
			return fmt.Errorf("%w: key of %d bytes (want 1..%d)", ErrInvalidHeaders, len(k), MaxHeaderKeyLength)
		}
		if len(v) > MaxHeaderValueLength {
			return fmt.Errorf("%w: value of %q has %d bytes (limit %d)", ErrInvalidHeaders, k, len(v), MaxHeaderValueLength)
		}
	}
	return nil
}

// maxMaxRetries is consumer.MaxMaxRetries (the attempt lives in three
// decimal digits of the prepare score); producer does not import consumer.
const maxMaxRetries = 998

// options turns the validated per-message options into the envelope's
// options block, at send time now (local clock: WithTTL and WithDelay
// count from the call). Nil when there are none: a message without options
// stores no byte for them.
func (j jobConfig) options(now time.Time) ([]byte, error) {
	var o scripts.Options
	o.MaxRetries, o.HasMaxRetries = j.maxRetries, j.hasMaxRetries
	// Expiry rounds down: a message is never delivered at or after it.
	exp := j.expiresAt
	if j.hasTTL && (exp.IsZero() || now.Add(j.ttl).Before(exp)) {
		exp = now.Add(j.ttl)
	}
	if !exp.IsZero() {
		if !exp.After(now) {
			return nil, fmt.Errorf("%w: %v is not after now", ErrInvalidExpiry, exp)
		}
		o.ExpiresAtMs = exp.UnixMilli()
	}
	if j.timeout > 0 {
		o.TimeoutMs = int64((j.timeout + time.Millisecond - 1) / time.Millisecond)
	}
	// Not-before rounds up: never before the instant.
	nb := j.notBefore
	if j.hasDelay && j.delay > 0 {
		nb = now.Add(j.delay)
	}
	if !nb.IsZero() {
		ms, _ := fixedScore(nb)
		o.NotBeforeMs = int64(ms)
	}
	if len(j.headers) > 0 {
		if err := checkHeaders(j.headers); err != nil {
			return nil, err
		}
		o.Headers = j.headers
	}
	return scripts.EncodeOptions(o), nil
}
