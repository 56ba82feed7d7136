// Package producer sends messages to RMQ topics: range-merge messages that
// collapse repeats within a time window, priority messages delivered highest
// first, and fixed-time messages delivered at an exact instant, never
// before it. It also removes a message by id wherever it is.
//
// A program takes its producer from its client: rmq.Client.Producer. The
// client's options configure it (rmq.WithPrefix, rmq.WithMaxBodySize,
// rmq.WithObserver, rmq.WithSendHook). A producer holds no goroutine, so it
// works before rmq.Client.Start and after Close, and a program that only
// sends needs no Start at all:
//
//	c, err := rmq.New(rdb)
//	if err != nil {
//		return err
//	}
//	p := c.Producer()
//
// # Sending
//
// Each topic type has its send method; a send on a topic of another type
// fails with ErrTypeMismatch. A send returns the message's id.
//
//	// Due 5 s after the first send; repeats meanwhile merge into it.
//	id, err := p.SendRangeMerge(ctx, prices, []byte(`{"sku":42}`), 5*time.Second, producer.WithKey("sku-42"))
//
//	// Delivered before every waiting message of lower priority.
//	id, err = p.SendPriority(ctx, jobs, []byte("resize image 7"), 50)
//
//	// Due at an instant (a time in the past is due at once).
//	id, err = p.SendFixedTime(ctx, timeouts, []byte("cancel unless paid"), time.Now().Add(15*time.Minute),
//		producer.WithKey("order-1001"))
//
// # Identity, merging and slots
//
// A message's id is WithKey's key, else derived from its body (BodyID), so
// identical bodies are one message. A send of an id that already waits
// merges by the topic type's rule: range-merge keeps the first due time and
// takes the latest body; priority and fixed-time take the new priority or
// instant and body. A send of an id that is being handled is stored again
// and delivered after that delivery ends. The message's slot is CRC32 of
// its slot basis (WithSlotBasis, else the id) modulo the topic's slot
// amount; messages that share a basis share a slot, which is what serial
// consumption (rmq.WithZooKeeper) orders by.
//
// # Per-message options
//
// A send takes SendOptions: WithKey, WithSlotBasis, WithHeaders, a retry
// limit (WithMaxRetries), an expiry (WithTTL, WithExpiresAt), a handler
// timeout (WithTimeout), a not-before time for priority messages
// (WithNotBefore, WithDelay) and a group for flow control (WithGroup). They
// live in the message's envelope in Redis, so they survive retries,
// requeues and a change of consumer.
//
//	_, err := p.SendPriority(ctx, jobs, body, 20,
//		producer.WithKey("invoice-3"),
//		producer.WithMaxRetries(3),
//		producer.WithTTL(time.Hour),
//		producer.WithHeaders(map[string]string{"tenant": "acme"}),
//	)
//
// # Unique sends
//
// WithUniqueFor(d) makes a send refuse a repeat: it fails with ErrDuplicate
// and writes nothing (no message, no wake-up) when a unique send of the
// same id to the topic was accepted less than that send's window ago,
// whether that message still waits, is being handled, was acked, went dead
// or was removed. An accepted unique send claims its id for d (1ms up to
// MaxUniqueFor, on Redis's clock). The check and the claim are part of the
// send's own script call, so concurrent sends of one id let exactly one
// through, and a send without the option costs nothing more. On a
// range-merge topic a repeat within the window is refused instead of
// merged: the caller asked to know. In SendBatch and SendMany each message
// is refused or accepted on its own.
//
//	_, err := p.SendFixedTime(ctx, mails, body, time.Now(),
//		producer.WithKey("receipt-1001"), producer.WithUniqueFor(24*time.Hour))
//	if errors.Is(err, producer.ErrDuplicate) {
//		// sent already within the day
//	}
//
// # Batches
//
// SendBatch sends many messages of one topic, validated all first (one bad
// message fails the batch and writes nothing), with one script call per
// slot. SendMany sends messages of any topics and reports each one on its
// own, for servers that gather concurrent requests (rmqd's publishes). A
// unique message refused as a duplicate does not fail the others: SendBatch
// stores them, gives the refused ones an empty id and returns an error
// that wraps ErrDuplicate.
//
//	ids, err := p.SendBatch(ctx, timeouts, []producer.BatchMessage{
//		{Key: "order-1", Body: []byte("cancel 1"), At: due1},
//		{Key: "order-2", Body: []byte("cancel 2"), At: due2},
//	})
//
// # Removing
//
// Remove deletes a message and its body wherever it waits, or while it is
// handled (that delivery's ack is then refused), and says where it found
// it: NotFound, RemovedWaiting, RemovedDelayed or RemovedInFlight. Pass the
// WithSlotBasis or WithGroup the message was sent with. Dead messages are
// the Inspector's (rmq.Inspector.DeleteDead).
//
//	where, err := p.Remove(ctx, timeouts, "order-1001")
//
// # Redis calls and retries
//
// Every send is a Lua script call that touches one topic slot (on a single
// node a call may carry several slots). Single sends that arrive together
// share one call (group commit: no timer, a send that finds Redis idle goes
// at once). A send is safe to repeat: the same id merges by its type's
// rule, and a script call that go-redis resends after a lost reply
// recognises its own earlier run (SendDuplicate; a unique send's rerun
// finds its own claim and succeeds). Due times are stored in
// milliseconds rounded up, so no message is delivered before the instant it
// was given. The first send to a topic stores the topic's definition (a
// conflicting stored one fails the send with topic.ErrConflict), and a
// producer that keeps sending checks it again at most every 10 s, storing it
// again if Redis lost it.
//
// # Errors
//
// Bad input is refused before anything is written, with an exported
// sentinel (match with errors.Is): ErrEmptyBody, ErrBodyTooLarge,
// ErrInvalidPriority, ErrInvalidTime, ErrInvalidRange, ErrTypeMismatch,
// ErrInvalidKey, ErrInvalidSlotBasis, ErrInvalidMaxRetries,
// ErrInvalidExpiry, ErrInvalidTimeout, ErrInvalidHeaders, ErrInvalidGroup
// and ErrInvalidUniqueFor (ErrInvalidRecurring is a schedule's, for options a
// recurring message may not have); a topic stored with another type or slot
// amount gives topic.ErrConflict. A unique send refused as a repeat gives
// ErrDuplicate. Errors from Redis come through as go-redis
// returned them.
//
// # Concurrency
//
// A Producer is safe for concurrent use; concurrent sends are what group
// commit gathers. The client's send hooks (rmq.WithSendHook) run on the
// sending goroutine.
//
// In the repository, docs/api.md has each type's rules and docs/jobs.md the
// per-message options.
package producer
