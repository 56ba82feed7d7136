package engine

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// byIDReporters are the hub's flow reporters for acks by id, one per key
// prefix (a Reporter caches its topics' event log lengths).
type byIDReporters struct {
	mu sync.Mutex
	by map[string]*flowtree.Reporter
}

func (h *Hub) reporterFor(prefix string) *flowtree.Reporter {
	h.byID.mu.Lock()
	defer h.byID.mu.Unlock()
	if r, ok := h.byID.by[prefix]; ok {
		return r
	}
	if h.byID.by == nil {
		h.byID.by = map[string]*flowtree.Reporter{}
	}
	r := flowtree.NewReporter(h.rdb, prefix)
	if o, ok := h.cfg.Observer.(treeObserver); ok {
		r.Observe = o.FlowParent
	}
	h.byID.by[prefix] = r
	return r
}

// reportByID reports the completion of id, when it is a flow child in
// flight in slot, to its parent before AckByID acks it, as reportCompleted
// does for a delivery an engine holds: a completion must reach the
// parent's record before the ack, or the reconciler, finding the child
// gone without a trace, counts it as removed and fails the parent. An
// AckByID caller holds no message, so the child's watch entry in its slot
// (written with the flow, cleared once its outcome is recorded) names the
// parent. An id that is no flow child costs one pipelined read.
// child says whether it reported (the watch entry goes after the ack).
func (h *Hub) reportByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) (child bool, err error) {
	pipe := h.rdb.Pipeline()
	up := pipe.HGet(ctx, keyspace.TreeKeysFor(prefix, t.Name(), slot).Up, id)
	lease := pipe.ZScore(ctx, keyspace.SlotKeysFor(prefix, t.Name(), slot).Prepare, id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	entry, err := up.Result()
	if errors.Is(err, redis.Nil) {
		return false, nil // no flow child, or its outcome is recorded already
	}
	if err != nil {
		return false, err
	}
	if _, err := lease.Result(); err != nil {
		if errors.Is(err, redis.Nil) {
			return false, nil // not in flight: the ack finds nothing to end
		}
		return false, err
	}
	// "p" marks a child that is itself a parent; the rest is its ref.
	ref, ok := flowtree.ParseRef(strings.TrimPrefix(entry, "p"))
	if !ok {
		return false, nil
	}
	return true, h.reporterFor(prefix).Report(ctx, ref, 'c', "", nil)
}

// forgetByID clears id's watch entry once AckByID acked it.
func (h *Hub) forgetByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) {
	if err := h.reporterFor(prefix).Forget(ctx, t.Name(), slot, id); err != nil {
		h.cfg.Logger.WarnContext(ctx, "rmq: clear a flow child's watch entry (a scan clears it)", "id", id, "err", err)
	}
}
