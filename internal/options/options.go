// Package options holds the plain settings that the public options of
// package consumer write into and the engine (internal/engine) reads: a
// consumer.Option is a TopicFunc, seen from outside the module as a sealed
// interface (TopicOption). Defaults and validation are the engine's
// (engine.TopicSettings), so this package holds data and the seams only.
package options

import "time"

// Topic is what the consumer options of one topic set (consumer.With...).
// The client-scope settings a consumer also runs with (key prefix, logger,
// observer, middleware) are not here: they are the client's (rmq.Option),
// so no topic option can contradict them.
type Topic struct {
	MaxRetries     int
	PrepareTimeout time.Duration
	Concurrency    int
	Prefetch       int
	Lookahead      time.Duration
	Backoff        func(attempt int) time.Duration
	HandlerTimeout time.Duration
	SweepInterval  time.Duration
	DeadMaxLen     int
	DeadMaxAge     time.Duration
	// Limits are the fleet-wide flow limits the consumer asks for; the
	// ones stored with the topic win (internal/engine/flow/state.go).
	Limits Limits
	// AdaptiveMin and AdaptiveMax (both 0: off) bound this process's
	// concurrency of the topic, which moves between them
	// (consumer.WithAdaptiveConcurrency).
	AdaptiveMin, AdaptiveMax int
	// Retention and Events are the life settings the consumer asks for
	// (consumer.WithRetention, WithEvents); the ones stored with the topic
	// win (internal/life.Resolve).
	Retention time.Duration
	Events    int
	// Bad lists what options found wrong with their arguments (a count of
	// 0 that would otherwise read as "no limit"); TopicSettings refuses
	// the first.
	Bad []string
}

// TopicOption is what consumer.Option is: an interface whose one method is
// unexported here, so only this package's TopicFunc implements it. Package
// consumer embeds it through an unexported alias, which keeps its public
// signatures free of this package's types while the engine, which applies
// the options, is checked by the compiler (no init() hook, no any).
type TopicOption interface{ applyTopic(*Topic) }

// TopicFunc is a consumer option: it writes into the settings of a topic.
type TopicFunc func(*Topic)

func (f TopicFunc) applyTopic(t *Topic) { f(t) }

// ApplyTopic applies o to t; o is not nil (the caller checks).
func ApplyTopic(t *Topic, o TopicOption) { o.applyTopic(t) }
