package rmq

import (
	"context"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// More message states, of flows (producer.SendFlow).
const (
	// StateWaitingChildren is a flow's parent whose children have not all
	// finished: it is not deliverable, nor counted as waiting.
	StateWaitingChildren MessageState = "waiting_children"
	// StateRemoved is a flow's child that was removed (or expired) before
	// it finished.
	StateRemoved MessageState = "removed"
)

// EventReleased is the event a flow's parent records in its topic's event
// log (Lifecycle.Events) when its last child finished and it became
// deliverable; a parent a child's failure moved to the dead queue records
// EventDead.
const EventReleased EventType = "released"

// FlowInfo is a flow (producer.SendFlow) as the Inspector sees it: a node
// and its children, each with its state.
type FlowInfo struct {
	Node     MessageInfo
	Children []FlowInfo
}

// Flow returns the flow below id of t: the message, in any state
// (StateWaitingChildren while its children run), and its children, each a
// flow of its own. A finished child that its topic does not retain shows
// its outcome as its state (completed, dead, cancelled, removed) and its
// result. A message that is no parent has no children; an unknown id is
// ErrMessageNotFound.
func (i *Inspector) Flow(ctx context.Context, t topic.Topic, id string) (FlowInfo, error) {
	f, err := i.in.Tree(ctx, t, id)
	if err != nil {
		return FlowInfo{}, err
	}
	return flowInfo(f), nil
}

func flowInfo(f inspect.FlowInfo) FlowInfo {
	out := FlowInfo{Node: messageInfo(f.Node)}
	for _, c := range f.Children {
		out.Children = append(out.Children, flowInfo(c))
	}
	return out
}

// FlowParentObserver is an optional extension of Observer: it is told
// when a flow's parent (producer.SendFlow) of topic was released, its
// children all finished (failed false), or moved to the dead queue by a
// child's failure (failed true), by a report this client made.
type FlowParentObserver interface {
	FlowParent(topic string, failed bool)
}

func (o *observers) FlowParent(topic string, failed bool) {
	each(o.list, func(x FlowParentObserver) { x.FlowParent(topic, failed) })
}

// FlowStartObserver is an optional extension of Observer: it is told of
// each flow this client's producer wrote (producer.SendFlow), by the
// root's topic, with the number of messages in the tree (the root
// included; 1 for a flow without children, sent as an ordinary message).
type FlowStartObserver interface {
	FlowStarted(t topic.Topic, nodes int)
}

// FlowSent implements options.FlowNotifier: the producer's report of a
// flow written, for the observers that implement FlowStartObserver.
func (o *observers) FlowSent(root topic.Topic, nodes int) {
	each(o.list, func(x FlowStartObserver) { x.FlowStarted(root, nodes) })
}
