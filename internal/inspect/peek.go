package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// WaitingMessage is rmq.WaitingMessage as this package makes it; rmq converts it.
type WaitingMessage struct {
	ID    string
	Topic string
	Slot  int
	Body  []byte
	// Attempts is how many deliveries of it failed so far (0: fresh).
	Attempts  int
	LastError string
	// FirstSentAt is the Redis time of the message's first send.
	FirstSentAt time.Time
	// Score is the store score that orders it: the due time in ms for
	// time-based topics, else the priority (0..16 for a retry, which ranks
	// below every fresh message).
	Score float64
	// DueAt is when a time-based message is due (zero for priority topics).
	DueAt time.Time
	// Priority is the priority a priority message was sent with (zero for
	// time-based topics).
	Priority int64
	// InFlight is true when a delivery of the same id is being handled; this
	// message waits until that delivery ends.
	InFlight bool
}

// Peek is the work of rmq.Inspector.Peek, whose doc says what it does.
func (i *Inspector) Peek(ctx context.Context, t topic.Topic, limit int) ([]WaitingMessage, error) {
	if limit == 0 {
		limit = DefaultListLimit
	}
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if err := i.check(ctx, t); err != nil {
		return nil, err
	}
	n := t.SlotAmount()
	srcs := make([]zsource, n)
	cards := make([]*redis.IntCmd, n)
	err := i.pipelined(ctx, n, func(pipe redis.Pipeliner, slot int) {
		srcs[slot] = zsource{slot: slot, key: i.keys(t, slot).Store}
		cards[slot] = pipe.ZCard(ctx, srcs[slot].key)
	})
	if err != nil {
		return nil, fmt.Errorf("rmq: peek %s: %w", t.Name(), err)
	}
	for slot := range srcs {
		srcs[slot].end = cards[slot].Val()
	}
	page, err := i.mergePage(ctx, srcs, listOrder{rev: !t.Type().TimeBased()}, limit)
	if err != nil {
		return nil, fmt.Errorf("rmq: peek %s: %w", t.Name(), err)
	}
	bodies := make([]*redis.StringCmd, len(page))
	inflight := make([]*redis.FloatCmd, len(page))
	err = i.pipelined(ctx, len(page), func(pipe redis.Pipeliner, j int) {
		k := i.keys(t, page[j].slot)
		bodies[j] = pipe.HGet(ctx, k.Msg, page[j].id)
		inflight[j] = pipe.ZScore(ctx, k.Prepare, page[j].id)
	})
	if err != nil {
		return nil, fmt.Errorf("rmq: peek %s: %w", t.Name(), err)
	}
	out := make([]WaitingMessage, 0, len(page))
	for j, e := range page {
		raw, err := bodies[j].Bytes()
		if errors.Is(err, redis.Nil) {
			continue // delivered and acked since it was listed
		}
		env, err := scripts.DecodeEnvelope(raw)
		if err != nil {
			return nil, fmt.Errorf("rmq: peek %s: message %s in slot %d: %w", t.Name(), e.id, e.slot, err)
		}
		m := WaitingMessage{
			ID:          e.id,
			Topic:       t.Name(),
			Slot:        e.slot,
			Body:        env.Body,
			Attempts:    env.Failures,
			LastError:   env.LastError,
			FirstSentAt: time.UnixMilli(int64(env.FirstSentMs)),
			Score:       e.score,
			InFlight:    inflight[j].Err() == nil,
		}
		if t.Type().TimeBased() {
			m.DueAt = time.UnixMilli(int64(e.score))
		} else {
			m.Priority = int64(env.OrigScore)
		}
		out = append(out, m)
	}
	return out, nil
}
