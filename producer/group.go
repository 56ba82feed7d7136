package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// ErrInvalidGroup is returned for a WithGroup group that is empty, longer
// than MaxGroupLength or has characters outside [A-Za-z0-9._:-], and for
// WithGroup with WithSlotBasis (the group picks the slot).
var ErrInvalidGroup = errors.New("rmq: invalid group")

// MaxGroupLength is the longest group accepted.
const MaxGroupLength = 128

// WithGroup puts the message in a group: a tenant, a customer, a device
// ([A-Za-z0-9._:-]{1,128}). The groups of a topic are served in turn, so a
// group with a long backlog delays another group's message by at most one
// turn (within a group its messages go in the topic's order), and the
// consumer options WithGroupConcurrency and WithGroupRateLimit limit each
// group. The group picks the message's slot (CRC32 of the group), so it
// cannot be combined with WithSlotBasis; pass it to Remove too, so the
// message is looked for in its slot. Message.Group carries it.
func WithGroup(group string) SendOption {
	return func(c *sendConfig) { c.group, c.hasGroup = group, true }
}

// checkGroup validates a group name.
func checkGroup(g string) error {
	if len(g) == 0 || len(g) > MaxGroupLength {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidGroup, len(g), MaxGroupLength)
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q (want [A-Za-z0-9._:-])", ErrInvalidGroup, g)
		}
	}
	return nil
}

// markGrouped tells the consumers of t that its messages carry groups, once
// per producer and topic before its first grouped send: it stores the mark
// (keyspace.GroupedKey, which consumers read when they start) and, the first
// time in Redis, wakes every slot with the payload "G", so running
// consumers serve the groups from then on.
func (p *Producer) markGrouped(ctx context.Context, t topic.Topic) error {
	v, ok := p.defined.Load(t.Name())
	if !ok {
		return nil // define stores it first
	}
	d := v.(*definedTopic)
	if d.grouped.Load() {
		return nil
	}
	added, err := p.rdb.HSet(ctx, keyspace.GroupedKey(p.prefix), t.Name(), "1").Result()
	if err != nil {
		return fmt.Errorf("rmq: mark %s as grouped: %w", t.Name(), err)
	}
	if added > 0 {
		pipe := p.rdb.Pipeline()
		for i := range t.SlotAmount() {
			ch := keyspace.KeysFor(p.prefix, t, i).Wake
			if p.wakeCmd == "SPUBLISH" {
				pipe.SPublish(ctx, ch, "G")
			} else {
				pipe.Publish(ctx, ch, "G")
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("rmq: mark %s as grouped: %w", t.Name(), err)
		}
	}
	d.grouped.Store(true)
	return nil
}

// groupedFlag is definedTopic's mark (define.go): the topic was marked
// grouped by this producer.
type groupedFlag = atomic.Bool
