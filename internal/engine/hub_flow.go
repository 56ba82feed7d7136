package engine

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/flow"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// flowEngines lets the hub find an engine of a topic for the acks that do
// not come from an engine (AckByID: rmqd acks a pulled job by id), so they
// name the topic's flow keys too and free a group's place at once. Without
// an engine of the topic in this client such an ack names none: the
// group's place then frees when a fetch validates it (grouplib.lua).
type flowEngines struct {
	mu sync.Mutex
	by map[string][]*Engine // prefix "\x00" topic -> its engines here
}

func flowKey(prefix, topicName string) string { return prefix + "\x00" + topicName }

// addFlow registers a started engine.
func (h *Hub) addFlow(c *Engine) {
	f := &h.flows
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string][]*Engine{}
	}
	k := flowKey(c.cfg.prefix, c.topic.Name())
	f.by[k] = append(f.by[k], c)
}

// dropFlow unregisters a closing engine.
func (h *Hub) dropFlow(c *Engine) {
	f := &h.flows
	f.mu.Lock()
	defer f.mu.Unlock()
	k := flowKey(c.cfg.prefix, c.topic.Name())
	es := f.by[k]
	for i, e := range es {
		if e == c {
			es = append(es[:i], es[i+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(f.by, k)
	} else {
		f.by[k] = es
	}
}

// flowEngine returns an engine of the topic, nil when none is here.
func (h *Hub) flowEngine(prefix, topicName string) *Engine {
	f := &h.flows
	f.mu.Lock()
	defer f.mu.Unlock()
	if es := f.by[flowKey(prefix, topicName)]; len(es) > 0 {
		return es[0]
	}
	return nil
}

// byIDCalls numbers the permit calls of ends by id made without an engine.
var byIDCalls atomic.Uint64

// endedByID gives back the place of a cluster's topic concurrency that
// whatever delivery of id in slot held, once an ack by id ended it: an
// engine of the topic here gives it (and the engines that pulled it
// forget it); without one, the place is given back by name all the same
// (rmqd behind a load balancer acks jobs other processes pulled, whose
// places must come back; a topic without limits has none to give).
func (h *Hub) endedByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) {
	if _, single := h.rdb.(*redis.Client); single {
		return
	}
	f := &h.flows
	f.mu.Lock()
	es := append([]*Engine(nil), f.by[flowKey(prefix, t.Name())]...)
	f.mu.Unlock()
	if len(es) > 0 {
		for _, e := range es[1:] {
			if pm := e.flow.permits; pm != nil {
				pm.Forget(slot, id)
			}
		}
		es[0].flow.endedByID(ctx, slot, id)
		return
	}
	pc := scripts.PermitCall{Keys: slots.FlowKeysFor(prefix, t), ID: h.id + ":" + strconv.FormatUint(byIDCalls.Add(1), 36),
		End: []scripts.PlaceEnd{{Member: scripts.PlaceMember(slot, id), Token: -1}}}
	if _, err := flow.RunPermit(ctx, h.rdb, scripts.WakeCommand(h.rdb), slots.KeysFor(prefix, t, 0).Wake, pc); err != nil {
		h.cfg.Logger.WarnContext(ctx, "rmq: give back a place", "topic", t.Name(), "err", err)
	}
}
