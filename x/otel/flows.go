package rmqotel

import (
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Flows (producer.SendFlow): the flows this process's producers wrote, by
// the root's topic (rmq.FlowStartObserver), and the flow parents released
// (all their children finished) or failed (a child's failure moved them to
// the dead queue), by the parent's topic (rmq.FlowParentObserver). A
// parent's release or failure is counted by the one client whose report
// decided it.
//
//	rmq.flows.started          {messaging.destination.name}
//	rmq.flow.parents.released  {messaging.destination.name}
//	rmq.flow.parents.failed    {messaging.destination.name}
type flowInstruments struct {
	started, released, failed metric.Int64Counter
}

var (
	_ rmq.FlowStartObserver  = (*Telemetry)(nil)
	_ rmq.FlowParentObserver = (*Telemetry)(nil)
)

func (f *flowInstruments) init(m metric.Meter) error {
	var err error
	if f.started, err = m.Int64Counter("rmq.flows.started", metric.WithUnit("{flow}"),
		metric.WithDescription("Flows (producer.SendFlow) written, by the root's topic.")); err != nil {
		return err
	}
	if f.released, err = m.Int64Counter("rmq.flow.parents.released", metric.WithUnit("{message}"),
		metric.WithDescription("Flow parents made deliverable because all their children finished.")); err != nil {
		return err
	}
	f.failed, err = m.Int64Counter("rmq.flow.parents.failed", metric.WithUnit("{message}"),
		metric.WithDescription("Flow parents moved to the dead queue by a child's failure."))
	return err
}

func flowAttrs(topicName string) metric.MeasurementOption {
	return metric.WithAttributes(semconv.MessagingSystemKey.String(systemName), semconv.MessagingDestinationName(topicName))
}

// FlowStarted implements rmq.FlowStartObserver.
func (t *Telemetry) FlowStarted(tp topic.Topic, _ int) {
	t.inst.flows.started.Add(bg, 1, flowAttrs(tp.Name()))
}

// FlowParent implements rmq.FlowParentObserver.
func (t *Telemetry) FlowParent(topicName string, failed bool) {
	if failed {
		t.inst.flows.failed.Add(bg, 1, flowAttrs(topicName))
		return
	}
	t.inst.flows.released.Add(bg, 1, flowAttrs(topicName))
}
