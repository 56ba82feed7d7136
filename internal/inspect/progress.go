package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// ProgressResult is what ProgressByID did.
type ProgressResult int

const (
	ProgressStored      ProgressResult = iota
	ProgressNotInFlight                // no delivery of the id is in flight: nothing written
	ProgressStale                      // the delivery read ended before the write: nothing written
)

// ProgressByID is the work of rmq.Client.SetProgressByID: it stores p as
// the progress of whatever delivery of id is in flight in t (progress.lua,
// which records a progress event when the topic's stored settings keep an
// event log), as a stateless caller that kept only the id can: the
// delivery current when it is read. One that ended between the read and
// the write is ProgressStale; a delivery held ahead of its instant was
// handed to nobody yet (not in flight), nor is a removed delivery's
// tombstone.
func (i *Inspector) ProgressByID(ctx context.Context, t topic.Topic, id string, p []byte) (ProgressResult, error) {
	// As AckByID: no read of the stored definition (a hot path of an HTTP
	// worker's service); the caller's topic names the slots.
	if i.err != nil {
		return 0, i.err
	}
	if t.IsZero() {
		return 0, fmt.Errorf("%w: zero Topic (use topic.New)", topic.ErrInvalidName)
	}
	slot := slots.IndexString(id, t.SlotAmount())
	k := keyspace.KeysFor(i.prefix, t, slot)
	score, err := i.rdb.ZScore(ctx, k.Prepare, id).Result()
	if errors.Is(err, redis.Nil) && t.SlotAmount() > 1 {
		// A body-derived or grouped id lives in another slot.
		if slot, err = PreparedSlot(ctx, i.rdb, i.prefix, t, id, slot); err == nil && slot >= 0 {
			k = keyspace.KeysFor(i.prefix, t, slot)
			score, err = i.rdb.ZScore(ctx, k.Prepare, id).Result()
		} else if err == nil {
			err = redis.Nil
		}
	}
	if errors.Is(err, redis.Nil) {
		return ProgressNotInFlight, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rmq: progress of %s on %s: %w", id, t.Name(), err)
	}
	_, token := scripts.SplitPrepareScore(score)
	if token == 0 || scripts.IsHeld(token) {
		return ProgressNotInFlight, nil
	}
	s, _, err := life.Read(ctx, i.rdb, i.prefix, t.Name())
	if err != nil {
		return 0, err
	}
	lk := keyspace.LifeKeysFor(i.prefix, t.Name(), slot)
	n, err := scripts.Progress.Run(ctx, i.rdb, []string{k.Prepare, lk.Progress, lk.Events}, id, token, p, s.Events).Int64()
	if err != nil {
		return 0, fmt.Errorf("rmq: progress of %s on %s: %w", id, t.Name(), err)
	}
	if n == 0 {
		return ProgressStale, nil
	}
	return ProgressStored, nil
}
