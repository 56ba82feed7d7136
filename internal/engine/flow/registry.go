package flow

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Registry lets a client's hub find the flow control of an engine of a
// topic for the acks that do not come from an engine (AckByID: rmqd acks
// a pulled job by id), so they name the topic's flow keys too and free a
// group's place at once. Without an engine of the topic in this client
// such an ack names none: the group's place then frees when a fetch
// validates it (grouplib.lua).
type Registry struct {
	mu sync.Mutex
	by map[string][]*State // prefix "\x00" topic -> its engines' here
}

func registryKey(prefix, topicName string) string { return prefix + "\x00" + topicName }

// Add registers the flow control of a started engine.
func (r *Registry) Add(s *State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string][]*State{}
	}
	k := registryKey(s.env.Prefix, s.env.Topic.Name())
	r.by[k] = append(r.by[k], s)
}

// Drop unregisters a closing engine's.
func (r *Registry) Drop(s *State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := registryKey(s.env.Prefix, s.env.Topic.Name())
	es := r.by[k]
	for i, e := range es {
		if e == s {
			es = append(es[:i], es[i+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(r.by, k)
	} else {
		r.by[k] = es
	}
}

// First returns the flow control of an engine of the topic, nil when
// none is here.
func (r *Registry) First(prefix, topicName string) *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if es := r.by[registryKey(prefix, topicName)]; len(es) > 0 {
		return es[0]
	}
	return nil
}

// byIDCalls numbers the permit calls of ends by id made without an engine.
var byIDCalls atomic.Uint64

// EndedByID gives back the place of a cluster's topic concurrency that
// whatever delivery of id in slot held, once an ack by id ended it: an
// engine of the topic here gives it (and the engines that pulled it
// forget it); without one, the place is given back by name all the same
// (rmqd behind a load balancer acks jobs other processes pulled, whose
// places must come back; a topic without limits has none to give).
// client names the client (rdb's) in its permit calls.
func (r *Registry) EndedByID(ctx context.Context, rdb redis.UniversalClient, client string, log *slog.Logger, prefix string, t topic.Topic, slot int, id string) {
	if _, single := rdb.(*redis.Client); single {
		return
	}
	r.mu.Lock()
	es := append([]*State(nil), r.by[registryKey(prefix, t.Name())]...)
	r.mu.Unlock()
	if len(es) > 0 {
		for _, e := range es[1:] {
			if pm := e.permits; pm != nil {
				pm.Forget(slot, id)
			}
		}
		es[0].EndedByID(ctx, slot, id)
		return
	}
	pc := scripts.PermitCall{Keys: keyspace.FlowKeysFor(prefix, t), ID: client + ":" + strconv.FormatUint(byIDCalls.Add(1), 36),
		End: []scripts.PlaceEnd{{Member: scripts.PlaceMember(slot, id), Token: -1}}}
	if _, err := RunPermit(ctx, rdb, scripts.WakeCommand(rdb), keyspace.KeysFor(prefix, t, 0).Wake, pc); err != nil {
		log.WarnContext(ctx, "rmq: give back a place", "topic", t.Name(), "err", err)
	}
}
