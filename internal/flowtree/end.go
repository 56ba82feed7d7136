package flowtree

import (
	"context"
	"fmt"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
)

// End cancels (state 'x') or removes ('r') parent id of slot of the topic
// named name while it waits for its children (flowend.lua): no child's
// outcome releases it any more, its children run on, and its own parent
// hears of it as of a child cancelled or removed. It reports whether it
// ended one: false for an id without a waiting record (not a parent, or
// one released, failed, ended or not activated yet).
func (r *Reporter) End(ctx context.Context, name string, slot int, id string, state byte) (bool, error) {
	s, _, err := life.Read(ctx, r.rdb, r.prefix, name)
	if err != nil {
		return false, err
	}
	lk := keyspace.LifeKeysFor(r.prefix, name, slot).Slice()
	keys := append([]string{keyspace.TreeRecordKey(r.prefix, name, slot, id), keyspace.TreeKeysFor(r.prefix, name, slot).Up}, lk[:]...)
	n, err := scripts.FlowEnd.Run(ctx, r.rdb, keys, string(state), r.wakeCmd, s.Retention.Milliseconds(), s.Events, Keep.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("rmq: end the flow parent %s/%s: %w", name, id, err)
	}
	if n == 0 {
		return false, nil
	}
	return true, r.Ended(ctx, name, slot, id, state)
}
