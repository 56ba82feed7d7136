package pull

import (
	"context"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// FlowNode is the library's flow node of a job of t: its id as the key,
// its tries, ttl and attributes as send options, its priority or due time.
func (j *JobSpec) FlowNode(t topic.Topic) producer.FlowNode {
	body := j.storedBody()
	opts := append(j.SendOptions(), producer.WithKey(j.ID))
	n := producer.FlowNode{Topic: t, Body: body, Options: opts, Priority: j.Prio}
	if t.Type() != topic.Priority {
		n.DueAt = j.Due
	}
	return n
}

// SendFlow writes a flow (producer.SendFlow): all of it or nothing.
func (p *Pool) SendFlow(ctx context.Context, root producer.FlowNode) (string, error) {
	return p.prod.SendFlow(ctx, root)
}

// Flow is the flow below id of t (rmq.Inspector.Flow).
func (p *Pool) Flow(ctx context.Context, t topic.Topic, id string) (rmq.FlowInfo, error) {
	return p.Insp.Flow(ctx, t, id)
}
