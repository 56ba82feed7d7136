package rmqprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Flows (producer.SendFlow): the flows this process's producers wrote, by
// the root's topic (rmq.FlowStartObserver), and the flow parents released
// (all their children finished) or failed (a child's failure moved them to
// the dead queue), by the parent's topic (rmq.FlowParentObserver). A
// parent's release or failure is counted by the one client whose report
// decided it, so the counters of a fleet add up to each parent once.
//
//	rmq_flows_started_total{topic}
//	rmq_flow_parents_released_total{topic}
//	rmq_flow_parents_failed_total{topic}
type flowMetrics struct {
	started, released, failed *prometheus.CounterVec
}

var (
	_ rmq.FlowStartObserver  = (*Metrics)(nil)
	_ rmq.FlowParentObserver = (*Metrics)(nil)
)

func (f *flowMetrics) register(reg prometheus.Registerer) error {
	labels := []string{"topic"}
	f.started = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "flows_started_total",
		Help: "Flows (producer.SendFlow) written, by the root's topic."}, labels)
	f.released = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "flow_parents_released_total",
		Help: "Flow parents made deliverable because all their children finished."}, labels)
	f.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "flow_parents_failed_total",
		Help: "Flow parents moved to the dead queue by a child's failure."}, labels)
	var err error
	for _, c := range []**prometheus.CounterVec{&f.started, &f.released, &f.failed} {
		if *c, err = register(reg, *c); err != nil {
			return err
		}
	}
	return nil
}

// FlowStarted implements rmq.FlowStartObserver.
func (m *Metrics) FlowStarted(t topic.Topic, _ int) {
	m.flows.started.WithLabelValues(t.Name()).Inc()
}

// FlowParent implements rmq.FlowParentObserver.
func (m *Metrics) FlowParent(topic string, failed bool) {
	if failed {
		m.flows.failed.WithLabelValues(topic).Inc()
		return
	}
	m.flows.released.WithLabelValues(topic).Inc()
}
