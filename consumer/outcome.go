package consumer

import (
	"errors"
	"fmt"
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

// Directive tells the engine what the handler asked for: 'd' (dead now),
// 'r' (retry after delay) or 's' (snooze for delay). The engine finds it
// with errors.As through an interface of this method, so the type stays
// unexported.
func (e *outcomeError) Directive() (kind byte, delay time.Duration) { return e.kind, e.delay }

// Outcome is how a delivery ended.
type Outcome int

const (
	// Acked: the listener returned nil and Redis took the ack.
	Acked Outcome = iota + 1
	// Retried: rolled back into store for another attempt.
	Retried
	// Dead: rolled back past MaxRetries into the dead queue.
	Dead
	// Superseded: rolled back while a re-send of the same id waited; the
	// re-send goes next.
	Superseded
	// Refused: Redis refused the ack or rollback because the delivery was
	// no longer current (its lease ran out and was swept).
	Refused
	// LeaseLost: the lease was found lost while the handler ran.
	LeaseLost
	// Abandoned: Close's deadline passed; the delivery was rolled back.
	Abandoned
	// Failed: the ack or rollback could not reach Redis; the lease will run
	// out and the sweeper will roll it back.
	Failed
	// Fenced: Redis refused the ack or rollback because the slot's owner
	// epoch moved on: another worker owns the slot now (ZooKeeper mode).
	Fenced
	// Revoked: the slot's ownership was lost while the handler ran and the
	// handler failed; the message stays in prepare and the slot's next term
	// returns it to store without counting an attempt (ZooKeeper mode).
	Revoked
	// Expired: the handler failed after the message's expiry
	// (producer.WithTTL): dropped with its body instead of retried.
	Expired
	// Snoozed: the handler returned Snooze; the message waits again
	// without an attempt counted.
	Snoozed
	// Cancelled: the message was cancelled (rmq.Inspector.Cancel) while
	// the handler ran; it is neither acked nor retried.
	Cancelled
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case Dead:
		return "dead"
	case Superseded:
		return "superseded"
	case Refused:
		return "refused"
	case LeaseLost:
		return "lease_lost"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	case Fenced:
		return "fenced"
	case Revoked:
		return "revoked"
	case Expired:
		return "expired"
	case Snoozed:
		return "snoozed"
	case Cancelled:
		return "cancelled"
	}
	return "unknown"
}
