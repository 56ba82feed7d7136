package wake

import (
	"errors"
	"log/slog"
	"time"
)

// ErrHubClosed: an engine started (or registered its wake-ups) after its
// client's hub was closed.
var ErrHubClosed = errors.New("rmq: consumer hub closed")

// Listener is the wake hub a ShardWaker serves: it routes what the
// subscriptions heard to the engines.
type Listener interface {
	// Logger is the client's logger.
	Logger() *slog.Logger
	// Dispatch hands one message heard on channel to its engine.
	Dispatch(channel, payload string)
	// LookAt marks channel's topic slot "look now" (its subscription was
	// confirmed again, wake-ups published meanwhile are lost); it reports
	// whether an engine listens there.
	LookAt(channel string) bool
	// Resubscribed tells the hub that subscriptions were made again (all:
	// every one of them).
	Resubscribed(all bool)
}

// Tuning is the wake hub's timing; a hub copies DefaultTuning
// (tests in this package shorten their hub's copy). The single node
// subscription uses HealthEvery and RetryMax too.
type Tuning struct {
	// HealthEvery is how long a subscription connection may stay silent
	// before it is PINGed; no answer within as long again fails it.
	HealthEvery time.Duration
	// CheckEvery is how often the slot map is re-read to catch moves that
	// no push announced.
	CheckEvery time.Duration
	// Settle collects a burst of events (a failover drops every channel of
	// a node, one push each) into one re-subscription.
	Settle time.Duration
	// RetryMax bounds the wait between failed placements.
	RetryMax time.Duration
}

var DefaultTuning = Tuning{
	HealthEvery: 3 * time.Second,
	CheckEvery:  10 * time.Second,
	Settle:      20 * time.Millisecond,
	RetryMax:    2 * time.Second,
}
