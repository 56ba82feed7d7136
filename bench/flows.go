package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The flows case (-cases flows; "flow" is flow control): what a flow's
// child costs, RMQ only. Per run, flowsBatches batches one after another,
// each a flow of flowsChildren priority children (-slots slots, -workers
// handlers, each setting a 16-byte result) under one fixed-time parent,
// against the same number of plain messages in the same run: Redis CPU
// and commands per child (send, consume, report and ack, the parent's
// release included), and the time from the last child's handler return
// (its report and ack follow) to its parent's delivery, p50 and p99 over
// every batch of every run.

const (
	flowsChildren = 1000
	flowsBatches  = 10
)

type flowsResults struct {
	plain, flow []costs         // one per run
	latency     []time.Duration // sorted
}

func (b *runner) flows(ctx context.Context, log *slog.Logger) error {
	res := &flowsResults{}
	b.res.flows = res
	for run := range b.o.runs {
		for _, isFlow := range []bool{run%2 == 0, run%2 != 0} {
			if err := b.reset(ctx); err != nil {
				return err
			}
			m := b.meter(ctx)
			lat, err := b.flowsRun(ctx, m, isFlow, log)
			if err != nil {
				return err
			}
			c := m.costs(flowsChildren * flowsBatches)
			if isFlow {
				res.flow = append(res.flow, c)
				res.latency = append(res.latency, lat...)
			} else {
				res.plain = append(res.plain, c)
			}
			progress("flows: run %d flow=%v: Redis %.1f µs/child, %.2f cmds/child", run+1, isFlow, c.redisCPUus, c.redisCmds)
		}
	}
	sort.Slice(res.latency, func(i, j int) bool { return res.latency[i] < res.latency[j] })
	progress("flows: last child -> parent p50 %v p99 %v", pct(res.latency, 0.5), pct(res.latency, 0.99))
	return b.reset(ctx)
}

// flowsRun sends and consumes flowsBatches batches (as flows, or as plain
// messages with a plain last message standing for the parent) and
// returns each flow's time from its last child's return to its parent's
// start.
func (b *runner) flowsRun(ctx context.Context, m *meter, isFlow bool, log *slog.Logger) ([]time.Duration, error) {
	kids := topic.MustNew("flows-kids", topic.Priority, b.o.slots)
	parents := topic.MustNew("flows-parents", topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer closeRMQ(c)
	var mu sync.Mutex
	var lastReturn time.Time
	left := 0
	started := make(chan time.Time, 1)
	result := []byte("result-0123456789")[:16]
	err = c.Register(kids, consumer.ListenerFunc(func(_ context.Context, msg *consumer.Message) error {
		_ = msg.SetResult(result)
		mu.Lock()
		lastReturn = time.Now()
		left--
		done := left == 0 && !isFlow
		mu.Unlock()
		if done {
			started <- time.Now()
		}
		return nil
	}), consumer.WithConcurrency(b.o.workers))
	if err != nil {
		return nil, err
	}
	err = c.Register(parents, consumer.ListenerFunc(func(ctx context.Context, msg *consumer.Message) error {
		at := time.Now()
		kids, err := msg.Children(ctx)
		if err != nil || len(kids) != flowsChildren {
			return fmt.Errorf("children: %d, %v", len(kids), err)
		}
		started <- at
		return nil
	}))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var out []time.Duration
	m.start()
	for batch := range flowsBatches {
		mu.Lock()
		left = flowsChildren
		mu.Unlock()
		if isFlow {
			root := producer.FlowNode{Topic: parents, Body: []byte("parent"), Options: []producer.SendOption{producer.WithKey(fmt.Sprintf("p%d", batch))}}
			for i := range flowsChildren {
				id := fmt.Sprintf("c%d-%d", batch, i)
				root.Children = append(root.Children, producer.FlowNode{Topic: kids, Body: []byte(id), Priority: 100, Options: []producer.SendOption{producer.WithKey(id)}})
			}
			if _, err := c.Producer().SendFlow(ctx, root); err != nil {
				return nil, err
			}
		} else {
			msgs := make([]producer.BatchMessage, flowsChildren)
			for i := range msgs {
				id := fmt.Sprintf("c%d-%d", batch, i)
				msgs[i] = producer.BatchMessage{Key: id, Body: []byte(id), Priority: 100}
			}
			if _, err := c.Producer().SendBatch(ctx, kids, msgs); err != nil {
				return nil, err
			}
		}
		select {
		case at := <-started:
			mu.Lock()
			out = append(out, at.Sub(lastReturn))
			mu.Unlock()
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("batch %d: no parent after a minute", batch)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.stop()
	return out, nil
}

// printFlowsReport prints the flows case.
func printFlowsReport(w io.Writer, o options, env environment, res *results) {
	r := res.flows
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nFlows: %d batches of %d priority children under one fixed-time parent, %d handlers, %d slots; medians of %d runs\n",
		flowsBatches, flowsChildren, o.workers, o.slots, o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tmsgs/s\tRedis µs/child\tRedis cmds/child\tscript calls/child\tclient µs/child\t")
	for _, v := range []struct {
		label string
		cs    []costs
	}{{"plain messages (SendBatch)", r.plain}, {"flow children (SendFlow)", r.flow}} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.2f\t%.2f\t%.1f\t\n", v.label,
			medianOf(v.cs, func(c costs) float64 { return c.rate }),
			medianOf(v.cs, func(c costs) float64 { return c.redisCPUus }),
			medianOf(v.cs, func(c costs) float64 { return c.redisCmds }),
			medianOf(v.cs, func(c costs) float64 { return c.scriptCalls }),
			medianOf(v.cs, func(c costs) float64 { return c.clientCPUus }))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nLast child's handler return -> parent's delivery, over %d flows: p50 %v, p99 %v, max %v\n",
		len(r.latency), pct(r.latency, 0.5), pct(r.latency, 0.99), pct(r.latency, 1))
	_ = env
}
