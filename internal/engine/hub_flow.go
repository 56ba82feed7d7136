package engine

import "sync"

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
