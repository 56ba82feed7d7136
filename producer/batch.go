package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/topic"
)

// BatchMessage is one message of SendBatch. Which scheduling field counts
// depends on the topic's type: TimeRange for range-merge, Priority for
// priority, At for fixed-time.
type BatchMessage struct {
	Body      []byte
	Key       string // optional merge identity, as WithKey
	SlotBasis []byte // optional, as WithSlotBasis
	TimeRange time.Duration
	Priority  int64
	At        time.Time
	// Options are per-message options (WithMaxRetries, WithTTL,
	// WithHeaders, ...), as for a single send. Key and SlotBasis above win
	// over WithKey and WithSlotBasis here.
	Options []SendOption
}

// SendBatch validates every message first (one bad message fails the batch
// and writes nothing), then stores them with one script call per slot,
// pipelined across slots. It returns the ids in the order of msgs. A Redis
// error can leave the batch partly stored; sending it again is safe (each
// message merges with itself by its type's rule).
//
// Messages sent with WithUniqueFor are refused or accepted each on its
// own: when some are refused as duplicates the others are stored, the
// refused ones' ids are "" and the error wraps ErrDuplicate.
func (p *Producer) SendBatch(ctx context.Context, t topic.Topic, msgs []BatchMessage) ([]string, error) {
	if err := p.checkTopic(t, t.Type()); err != nil {
		return nil, err
	}
	items := make([]*pending, len(msgs))
	for i, m := range msgs {
		it, err := p.batchItem(t, m)
		if err != nil {
			return nil, fmt.Errorf("rmq: batch message %d: %w", i, err)
		}
		items[i] = it
	}
	if len(items) == 0 {
		return nil, nil
	}
	afters := make([][]func(string, error), len(items))
	for i, it := range items {
		afters[i] = p.runHooks(ctx, it)
	}
	fail := func(err error) ([]string, error) {
		for i := range items {
			callAfters(afters[i], "", err)
		}
		return nil, err
	}
	for i, it := range items {
		if err := it.encodeOptions(); err != nil {
			return fail(fmt.Errorf("rmq: batch message %d: %w", i, err))
		}
	}
	if err := p.define(ctx, t); err != nil {
		return fail(err)
	}
	for _, it := range items {
		if it.job.group != "" {
			if err := p.markGrouped(ctx, t); err != nil {
				return fail(err)
			}
			break
		}
	}
	if err := p.runCalls(ctx, p.group(items)); err != nil {
		return fail(fmt.Errorf("rmq: send batch to %s: %w", t.Name(), err))
	}
	return p.batchSent(t, items, afters)
}

// batchSent reports a stored batch: each message's id and hooks, and an
// error wrapping ErrDuplicate naming the unique sends refused as
// duplicates (the only error a message has on its own once its call ran),
// whose ids are "".
func (p *Producer) batchSent(t topic.Topic, items []*pending, afters [][]func(string, error)) ([]string, error) {
	ids := make([]string, len(items))
	var refused []int
	for i, it := range items {
		if it.err != nil {
			refused = append(refused, i)
			callAfters(afters[i], "", fmt.Errorf("rmq: send to %s: %w", t.Name(), it.err))
			continue
		}
		ids[i] = it.id
		callAfters(afters[i], it.id, nil)
		if p.notify != nil {
			p.notify.Sent(t, int(it.res))
		}
	}
	if len(refused) > 0 {
		return ids, fmt.Errorf("rmq: send batch to %s: messages %v refused (their ids are \"\"), the others sent: %w", t.Name(), refused, ErrDuplicate)
	}
	return ids, nil
}

func (p *Producer) batchItem(t topic.Topic, m BatchMessage) (*pending, error) {
	var score float64
	var err error
	switch t.Type() {
	case topic.RangeMerge:
		score, err = rangeScore(m.TimeRange)
	case topic.Priority:
		score, err = priorityScore(m.Priority)
	case topic.FixedTime:
		score, err = fixedScore(m.At)
	}
	if err != nil {
		return nil, err
	}
	opts := append([]SendOption(nil), m.Options...)
	if m.Key != "" {
		opts = append(opts, WithKey(m.Key))
	}
	if m.SlotBasis != nil {
		opts = append(opts, WithSlotBasis(m.SlotBasis))
	}
	sc, err := sendOptions(opts, t.Type())
	if err != nil {
		return nil, err
	}
	return p.item(t, m.Body, score, sc)
}
