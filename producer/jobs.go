package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// runHooks runs the client's send hooks on it (they may add headers) and
// returns what to call once the write ended.
func (p *Producer) runHooks(ctx context.Context, it *pending) []func(string, error) {
	if p.notify == nil {
		return nil
	}
	headers, after := p.notify.Before(ctx, it.topic, it.id, it.body, it.job.headers)
	if len(headers) > 0 {
		it.job.headers = headers
	}
	if after == nil {
		return nil
	}
	return []func(string, error){after}
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
	o.Group = j.group
	return scripts.EncodeOptions(o), nil
}
