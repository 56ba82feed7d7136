package consumer

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxSnoozes is how often one message may be snoozed (Snooze); past it a
// snooze counts as a failed attempt, so a handler that snoozes forever
// still ends in the dead queue after its retries. The count lives in the
// message's envelope and survives retries (a requeue resets it).
const MaxSnoozes = 100

// SkipRetry wraps err so that the delivery goes to the dead queue at once,
// whatever retries are left (a poison message, a permanent error). The
// dead message's last error is err's text.
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("rmq: skip retry")
	}
	return &outcomeError{kind: 'd', err: err}
}

// RetryAfter wraps err so that the delivery is retried after d instead of
// the backoff: it counts as a failed attempt (past the retries it goes to
// the dead queue as usual). Any message type; a priority message waits
// out d in its slot's delayed set, then ranks as a retry.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("rmq: retry after " + d.String())
	}
	return &outcomeError{kind: 'r', delay: max(d, 0), err: err}
}

// Snooze puts the message back to be delivered again after d without
// counting an attempt: the handler could not work on it yet (a rate limit,
// a resource not ready). Bounded by MaxSnoozes.
func Snooze(d time.Duration) error {
	return &outcomeError{kind: 's', delay: max(d, 0), err: fmt.Errorf("rmq: snoozed for %v", d)}
}

// outcomeError carries what the handler asked for; its text is the
// cause's, so LastError keeps the cause.
type outcomeError struct {
	kind  byte // 'd' dead now, 'r' retry after delay, 's' snooze
	delay time.Duration
	err   error
}

func (e *outcomeError) Error() string { return e.err.Error() }
func (e *outcomeError) Unwrap() error { return e.err }

// rollbackDirective returns what rollback.lua is told for a handler's
// error: ” (the backoff), 'd', 'r<ms>' or 's<ms>'. Delays round up to the
// ms: never early.
func rollbackDirective(err error) string {
	var o *outcomeError
	if !errors.As(err, &o) {
		return ""
	}
	if o.kind == 'd' {
		return "d"
	}
	ms := int64((o.delay + time.Millisecond - 1) / time.Millisecond)
	return string(o.kind) + strconv.FormatInt(ms, 10)
}
