// Package consumer holds what a listener of an RMQ topic sees and sets:
// Message, MessageListener and ListenerFunc, the per-topic options given to
// rmq.Client.Register, the outcomes a listener asks for (RetryAfter,
// SkipRetry, Snooze), Middleware, and the errors a handler context is
// cancelled with. The client (package rmq) runs the consumers; this package
// has no engine of its own.
//
// # Listening
//
// A listener is registered per topic before the client starts:
//
//	err := c.Register(orders, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
//		if err := cancelOrder(ctx, m.ID); err != nil {
//			return err // rolled back, retried after the backoff
//		}
//		return nil // acked
//	}),
//		consumer.WithConcurrency(16),
//		consumer.WithMaxRetries(5),
//	)
//
// Returning nil acks the delivery. Returning an error, panicking (the panic
// is recovered into a *PanicError) or running past the handler timeout
// rolls it back: the attempt is counted and the message comes back after
// the retry backoff (WithRetryBackoff, DefaultBackoff by default); past its
// retries (WithMaxRetries, default 16 retries after the first attempt) it
// moves to the topic's dead queue, where rmq.Inspector can requeue it.
//
// # Delivery
//
// Consumption is at least once, through a two-phase protocol: a fetch moves
// due messages from the slot's store to its prepare set under a lease
// (WithPrepareTimeout, extended while the listener runs), the listener
// runs, and the delivery ends with an ack or a rollback. A consumer that
// dies leaves its leases to run out; a live consumer's sweeper then rolls
// them back, counted as a failed attempt. So a listener must be
// idempotent, or record what it did with the message's ID.
//
// Fetching does not poll. A fetcher sleeps until the next due score of its
// slots and is woken early by a notification when a producer stores a
// message that becomes a slot's new head. One fetch moves at most as many
// due messages as there are free handlers (WithConcurrency), plus a
// prefetch (WithPrefetch); a fixed-time or range-merge message may be taken
// a little before its instant (WithLookahead) and is handed to its handler
// at the instant, never before.
//
// A Message carries the id, body, slot, attempt, due time or priority, the
// first send's time, headers, the per-message limits (MaxRetries, Timeout,
// ExpiresAt), its group, the delivery's Token and, in ZooKeeper mode, the
// slot's owner Epoch (a fencing token for the systems a handler writes to).
// MessageFromContext finds it in a handler's context.
//
// # Outcomes
//
// The error a listener returns chooses what happens next:
//
//	return consumer.RetryAfter(time.Minute, err) // retry in a minute instead of the backoff
//	return consumer.SkipRetry(err)               // to the dead queue at once (a poison message)
//	return consumer.Snooze(10 * time.Second)     // again in 10 s, no attempt counted
//
// The Outcome of each delivery (Acked, Retried, Dead, Superseded, Refused,
// LeaseLost, Abandoned, Failed, Fenced, Revoked, Expired, Snoozed,
// Cancelled) is what an rmq.Observer's Finished is told.
//
// # Results and progress
//
// A handler may set its delivery's result (Message.SetResult, at most
// MaxResultSize), stored with the ack: a topic that retains finished
// messages (WithRetention) keeps it readable, and whoever waits for the
// message receives it. While it works it may store its progress
// (Message.SetProgress with the handler's context, at most
// MaxProgressSize), readable on the in-flight message until the delivery
// ends. A message cancelled while its handler runs has the handler's
// context cancelled at once, and the delivery ends Cancelled: neither
// acked nor retried. WithEvents keeps a log of every transition.
//
// # Options
//
// Options apply to one topic: concurrency (WithConcurrency,
// WithAdaptiveConcurrency), the lease and its sweep (WithPrepareTimeout,
// WithSweepInterval), the handler timeout (WithHandlerTimeout), retries
// (WithMaxRetries, WithRetryBackoff), the dead queue's retention
// (WithDeadRetention), fetching ahead (WithPrefetch, WithLookahead) and
// fleet-wide flow control (WithRateLimit, WithGlobalConcurrency,
// WithGroupConcurrency, WithGroupRateLimit; stored with the topic, see
// rmq.Limits). Options of the whole client (key prefix, logger, observers,
// middleware) are rmq's. A value out of range makes Register fail with
// ErrInvalidOption.
//
// # Middleware
//
// A Middleware wraps a listener (tracing, logging, metrics). rmq.WithMiddleware
// wraps every topic's listener, the first of the list outermost; to wrap one
// topic's listener, wrap it before Register:
//
//	logged := func(next consumer.MessageListener) consumer.MessageListener {
//		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
//			err := next.OnMessage(ctx, m)
//			slog.InfoContext(ctx, "handled", "topic", m.Topic, "id", m.ID, "attempt", m.Attempt, "err", err)
//			return err
//		})
//	}
//	err := c.Register(orders, logged(listener))
//
// # Errors and cancellation
//
// The handler's context is cancelled when its timeout passes (cause
// ErrHandlerTimeout, also the delivery's last error), when its delivery is
// no longer the current one (cause ErrLeaseLost: the lease ran out and the
// message was rolled back), when Redis refused a stale owner in ZooKeeper
// mode (cause ErrFenced), and when Close gives up waiting (cause
// ErrShutdown; the delivery is rolled back). context.Cause(ctx) tells
// which. ErrInvalidOption is returned for an option out of range
// (rmq.ErrInvalidOption is the same value).
//
// # Concurrency
//
// Each delivery runs on a goroutine of its own, up to the topic's
// concurrency; a listener is called concurrently and must be safe for that.
// Messages of one slot are fetched in score order, but with a concurrency
// above 1 their handlers overlap: for serial handling per key use one
// handler, rmq.WithZooKeeper across a fleet, or WithGroupConcurrency(1)
// with producer.WithGroup.
//
// In the repository, docs/jobs.md has the outcomes, pull and pause, and
// docs/api.md the options by scope with their defaults.
package consumer
