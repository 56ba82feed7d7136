package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The history case (-cases history): what the per-minute history and the
// worker record every client keeps by default cost, RMQ only. Sends of -n
// FixedTime messages from -producers goroutines (single-message calls),
// and consume+ack of a backlog of -n with -workers handlers, each with
// the history on (the default) and off (rmq.WithHistory(0)), the variants
// alternating within each run; medians over -runs.

type histVariant struct {
	id, label string
	opts      []rmq.Option
}

func histVariants() []histVariant {
	return []histVariant{
		{id: "off", label: "WithHistory(0)", opts: []rmq.Option{rmq.WithHistory(0)}},
		{id: "on", label: "history on (the default)"},
	}
}

// historyResults are the history case's figures, by variant id.
type historyResults struct {
	produce, consume map[string][]costs
}

func (b *runner) history(ctx context.Context, log *slog.Logger) error {
	res := &historyResults{produce: map[string][]costs{}, consume: map[string][]costs{}}
	b.res.history = res
	label := func(v histVariant) (string, string) { return v.id, v.label }
	err := alternate(ctx, b, "history produce", histVariants(), label,
		func(m *meter, v histVariant) error { return b.histProduce(ctx, m, v, log) }, res.produce)
	if err != nil {
		return err
	}
	err = alternate(ctx, b, "history consume", histVariants(), label,
		func(m *meter, v histVariant) error { return b.histConsume(ctx, m, v, log) }, res.consume)
	if err != nil {
		return err
	}
	return b.reset(ctx)
}

func (b *runner) histClient(v histVariant, log *slog.Logger) (*rmq.Client, error) {
	return rmq.New(b.rdb, append([]rmq.Option{rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log)}, v.opts...)...)
}

// histProduce times -n single-message sends from -producers goroutines on
// a started client (which keeps its worker record, as a service does).
func (b *runner) histProduce(ctx context.Context, m *meter, v histVariant, log *slog.Logger) error {
	t := topic.MustNew("hist-p-"+v.id, topic.FixedTime, b.o.slots)
	c, err := b.histClient(v, log)
	if err != nil {
		return err
	}
	defer func() { _ = closeRMQ(c) }()
	if err := c.Start(ctx); err != nil {
		return err
	}
	p := c.Producer()
	if _, err := p.SendFixedTime(ctx, t, []byte("warm-up"), time.Now().Add(time.Hour)); err != nil {
		return err
	}
	bufs := make([][]byte, b.o.producers)
	m.start()
	err = parallel(ctx, b.o.n, b.o.producers, func(w, i int) error {
		bufs[w] = makeBody(bufs[w], b.o.body, "h", i, 0)
		_, err := p.SendFixedTime(ctx, t, bufs[w], time.Now())
		return err
	})
	m.stop()
	return err
}

// histConsume loads -n due messages (untimed) and times their drain.
func (b *runner) histConsume(ctx context.Context, m *meter, v histVariant, log *slog.Logger) error {
	t := topic.MustNew("hist-c-"+v.id, topic.FixedTime, b.o.slots)
	c, err := b.histClient(v, log)
	if err != nil {
		return err
	}
	if err := b.flowSend(ctx, c.Producer(), t, "c", b.o.n, time.Now(), func(int) string { return "" }); err != nil {
		return err
	}
	return b.drainTimed(ctx, m, c, t, nil, nil)
}

// printHistoryReport prints the history case.
func printHistoryReport(w io.Writer, o options, env environment, res *results) {
	r := res.history
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nHistory on vs off: %d single-message sends from %d goroutines, consume+ack of %d with %d handlers; %d slots, %d-byte bodies; medians of %d runs\n",
		o.n, o.producers, o.n, o.workers, o.slots, o.body, o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tvariant\tmsgs/s\tvs off\tRedis µs/msg\tRedis cmds/msg\tclient µs/msg\t")
	rate := func(c costs) float64 { return c.rate }
	for _, part := range []struct {
		name string
		cs   map[string][]costs
	}{{"produce", r.produce}, {"consume", r.consume}} {
		base := medianOf(part.cs["off"], rate)
		for _, v := range histVariants() {
			cs := part.cs[v.id]
			mr := medianOf(cs, rate)
			vs := ""
			if v.id != "off" && base > 0 {
				vs = fmt.Sprintf("%.1f %%", 100*mr/base)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%.2f\t%.3f\t%.1f\t\n", part.name, v.label, mr, vs,
				medianOf(cs, func(c costs) float64 { return c.redisCPUus }),
				medianOf(cs, func(c costs) float64 { return c.redisCmds }),
				medianOf(cs, func(c costs) float64 { return c.clientCPUus }))
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "redis:    redis-server %s, throwaway on %s (loopback, --save '' --appendonly no)\n", env.redisVersion, env.redisAddr)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}
