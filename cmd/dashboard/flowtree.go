package dashboard

import (
	"context"
	"errors"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// flowNode is one node of a flow (producer.SendFlow) as the message page
// draws it: a link to its own message page, its state, and its children.
type flowNode struct {
	Topic, ID string
	State     string
	Error     string
	Self      bool // the message whose page this is
	Children  []flowNode
}

// flowOf returns the flow the message m of t belongs to, from its root
// (found through each node's parent header) down, or nil when m is in no
// flow. A parent that cannot be read (finished and not retained) ends the
// walk up: the tree is then drawn from the highest node found.
func (h *handler) flowOf(ctx context.Context, m messageInfo) (*flowNode, error) {
	topicName, id, headers := m.Topic, m.ID, m.Headers
	for range producer.MaxFlowDepth + 1 {
		ref, ok := flowtree.RefOf(headers)
		if !ok {
			break
		}
		pt, err := h.lookup(ctx, ref.Topic)
		if err != nil {
			break
		}
		pm, err := h.nodeInfo(ctx, pt, ref.ID)
		if err != nil {
			break
		}
		topicName, id, headers = ref.Topic, ref.ID, pm.Headers
	}
	t, err := h.lookup(ctx, topicName)
	if err != nil {
		return nil, err
	}
	f, err := h.insp.Flow(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(f.Children) == 0 {
		return nil, nil // no parent, no children: no flow to draw
	}
	n := drawFlow(f, m.Topic, m.ID)
	return &n, nil
}

func drawFlow(f rmq.FlowInfo, selfTopic, selfID string) flowNode {
	n := flowNode{Topic: f.Node.Topic.Name(), ID: f.Node.ID, State: flowState(f.Node.State), Error: f.Node.LastError}
	n.Self = n.Topic == selfTopic && n.ID == selfID
	for _, c := range f.Children {
		n.Children = append(n.Children, drawFlow(c, selfTopic, selfID))
	}
	return n
}

// flowState names a node's state as the message page does.
func flowState(s rmq.MessageState) string {
	if name, ok := stateNames[s]; ok {
		return name
	}
	if s == rmq.StateWaitingChildren {
		return "waiting for children"
	}
	return string(s)
}

// nodeInfo reads a message of a flow: Inspector.Message, or for a parent
// waiting for its children (kept apart from the topic's queues until it is
// released, so Message does not find it) its node of Inspector.Flow.
func (h *handler) nodeInfo(ctx context.Context, t topic.Topic, id string) (rmq.MessageInfo, error) {
	mi, err := h.insp.Message(ctx, t, id)
	if !errors.Is(err, rmq.ErrMessageNotFound) {
		return mi, err
	}
	f, ferr := h.insp.Flow(ctx, t, id)
	if ferr != nil {
		return mi, err
	}
	return f.Node, nil
}

// parentMessage is the message page's message of a flow parent waiting
// for its children (nodeInfo); ErrMessageNotFound for any other id that
// Message did not find.
func (h *handler) parentMessage(ctx context.Context, t topic.Topic, id string) (messageInfo, error) {
	mi, err := h.nodeInfo(ctx, t, id)
	if err != nil {
		return messageInfo{}, err
	}
	return messageInfo{
		ID: mi.ID, Topic: t.Name(), Slot: mi.Slot, States: []string{flowState(mi.State)},
		Body: mi.Body, Headers: mi.Headers, Attempts: mi.Attempts, LastError: mi.LastError,
		FirstSent: mi.FirstSentAt, Due: mi.Due, Priority: mi.Priority,
		MaxRetries: mi.MaxRetries, Expires: mi.ExpiresAt, Timeout: mi.Timeout,
	}, nil
}
