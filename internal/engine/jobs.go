package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/topic"
)

// Wake payloads besides a score: a delayed entry's due time ('d' and the
// ms), a topic paused or resumed (Inspector.Pause, Resume), its stored
// limits changed ('L', Inspector.SetLimits), its messages carry groups
// from now on ('G', a producer's first grouped send), capacity came
// free under a topic concurrency ('f', flow/state.go), and a delivery in
// flight was cancelled ('x<token>:<id>', cancel.lua), and a flow's nodes
// were staged or made live in the slot ('T', flowstage.lua, flowact.lua).
const (
	wakeScore = iota
	wakeDelayed
	wakePause
	wakeResume
	wakeUnknown
	wakeLimits
	wakeGrouped
	wakeFlow
	wakeCancel
	wakeTree
)

// parseWake reads a wake channel payload.
func parseWake(p string) (kind int, score float64) {
	switch {
	case p == "p":
		return wakePause, 0
	case p == "r":
		return wakeResume, 0
	case p == "L":
		return wakeLimits, -1
	case p == "G":
		return wakeGrouped, -1
	case p == "f":
		return wakeFlow, -1
	case p == "T":
		return wakeTree, -1
	case len(p) > 1 && p[0] == 'x':
		// A running delivery was cancelled: "x<token>:<id>" (cancel.lua).
		return wakeCancel, -1
	case len(p) > 1 && p[0] == 'd':
		f, err := strconv.ParseFloat(p[1:], 64)
		if err != nil {
			return wakeUnknown, -1
		}
		return wakeDelayed, f
	}
	f, err := strconv.ParseFloat(p, 64)
	if err != nil {
		return wakeUnknown, -1
	}
	return wakeScore, f
}

// logOutcome logs the end of a delivery at the level it deserves: a
// dead-lettering at Warn, a panic at Error with the stack, other handler
// errors at Debug (they are retried, and a busy topic would flood the log).
func logOutcome(ctx context.Context, log *slog.Logger, m *consumer.Message, outcome consumer.Outcome, err error) {
	if err == nil {
		return
	}
	var p *consumer.PanicError
	switch {
	case errors.As(err, &p):
		log.ErrorContext(ctx, "rmq: handler panic", "id", m.ID, "slot", m.Slot, "attempt", m.Attempt, "outcome", outcome.String(), "panic", p.Value, "stack", string(p.Stack))
	case outcome == consumer.Dead:
		log.WarnContext(ctx, "rmq: message moved to the dead queue", "id", m.ID, "slot", m.Slot, "attempts", m.Attempt, "last_error", err.Error())
	default:
		log.DebugContext(ctx, "rmq: handler failed", "id", m.ID, "slot", m.Slot, "attempt", m.Attempt, "outcome", outcome.String(), "err", err.Error())
	}
}

// defineAndReadPaused stores or checks the topic's definition and reads its
// pause state, in one round trip shared with the engines that start at the
// same time (Hub.starts). Called once the wake channels are
// subscribed: a pause published from now on is heard, and one published
// before is read here.
func (c *Engine) defineAndReadPaused(ctx context.Context) error {
	if c.topic.IsZero() {
		return fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	r := &startRead{c: c, seq: c.hub.wake.NextPauseSeq()}
	if err := c.hub.starts.Do(ctx, r); err != nil {
		return fmt.Errorf("rmq: start %s: %w", c.topic.Name(), err)
	}
	if r.check == nil {
		return fmt.Errorf("rmq: start %s: %w", c.topic.Name(), r.err)
	}
	if err := r.check(); err != nil {
		return err
	}
	if err := r.get.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("rmq: read the pause state of %s: %w", c.topic.Name(), err)
	}
	if paused := r.get.Err() == nil; c.waker.ApplyPaused(r.seq, paused) {
		c.pauseChanged(paused)
	}
	for _, cmd := range []*redis.StringCmd{r.limits, r.grouped} {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("rmq: read the limits of %s: %w", c.topic.Name(), err)
		}
	}
	if err := c.flow.ApplyStored(ctx, r.limits, r.grouped); err != nil {
		return err
	}
	// The life settings in force: the stored ones win (a change is told on
	// the wake channels like the limits', heard from now on).
	if err := c.ops.Life.ApplyStored(ctx, r.life); err != nil {
		return fmt.Errorf("rmq: start %s: %w", c.topic.Name(), err)
	}
	return nil
}

// startRoundsInFlight bounds the start-up rounds (defineAndReadPaused)
// at once; engines that start meanwhile queue for the next.
const startRoundsInFlight = 4

// startRead is one starting engine's definition and pause read.
type startRead struct {
	c     *Engine
	seq   uint64 // taken before the read (wake.Hub.NextPauseSeq)
	check func() error
	get   *redis.StringCmd
	// limits and grouped: the topic's stored limits and grouped mark
	// (flow/state.go).
	limits, grouped *redis.StringCmd
	// life: the topic's stored life settings (redisops.Life).
	life *redis.StringCmd
	err  error // the round failed before its commands were queued
}

// runStartReads runs a round of starting engines' reads in one pipeline;
// each result is checked by its engine.
func runStartReads(ctx context.Context, rdb redis.UniversalClient, batch []*startRead) {
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range batch {
			r.check = topicstore.DefineIn(ctx, p, keyspace.TopicsKey(r.c.cfg.prefix), r.c.topic)
			// HGET, not HEXISTS: the least-privilege ACL allows the one.
			r.get = p.HGet(ctx, keyspace.PausedKey(r.c.cfg.prefix), r.c.topic.Name())
			r.limits = p.HGet(ctx, keyspace.LimitsKey(r.c.cfg.prefix), r.c.topic.Name())
			r.grouped = p.HGet(ctx, keyspace.GroupedKey(r.c.cfg.prefix), r.c.topic.Name())
			r.life = p.HGet(ctx, keyspace.LifeSettingsKey(r.c.cfg.prefix), r.c.topic.Name())
		}
		return nil
	})
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
	}
}

// pauseChanged tells a PauseObserver (and the log) that the topic's pause
// state, as read from Redis, changed.
func (c *Engine) pauseChanged(paused bool) {
	if o, ok := c.cfg.observer.(pauseObserver); ok {
		o.Paused(c.topic.Name(), paused)
	}
	c.log.Info("rmq: topic paused", "paused", paused)
}
