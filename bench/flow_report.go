package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// flowTarget is the target for a limit set far above the load: at
// least this share of the unlimited throughput of the same run.
const flowTarget = 0.90

// printFlowReport prints the flow case (flow.go).
func printFlowReport(w io.Writer, o options, env environment, res *results) {
	r := res.flow
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nFlow control: consume+ack of %d messages, %d handlers, %d slots, %d-byte bodies; medians of %d runs\n",
		o.n, o.workers, o.slots, o.body, o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tmsgs/s\tvs its base\tRedis µs/msg\tRedis cmds/msg\tclient µs/msg\t")
	rate := func(c costs) float64 { return c.rate }
	for _, v := range flowVariants() {
		cs := r.consume[v.id]
		mr := medianOf(cs, rate)
		vs := ""
		if v.base != "" {
			if b := medianOf(r.consume[v.base], rate); b > 0 {
				vs = fmt.Sprintf("%.0f %% of %q", 100*mr/b, v.base)
				if mr/b < flowTarget && v.base == "plain" || mr/b < flowTarget && v.id != "groups" && v.base == "groups" {
					vs += " (below 90 %)"
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.1f\t%.2f\t%.1f\t\n", v.label, mr, vs,
			medianOf(cs, func(c costs) float64 { return c.redisCPUus }),
			medianOf(cs, func(c costs) float64 { return c.redisCmds }),
			medianOf(cs, func(c costs) float64 { return c.clientCPUus }))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nFairness: one group of %d queued ahead of 100 groups of 5 (500 messages due after the whole backlog);\n", o.n)
	fmt.Fprintln(w, "the small groups' completion time since the consumer started:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "messages\tsmall p50\tsmall p99\tsmall max\twhole drain\t")
	for _, f := range r.fair {
		name := "without groups"
		if f.grouped {
			name = "in groups"
		}
		if f.err != "" {
			name += " (" + f.err + ")"
		}
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%v\t\n", name, f.p50.Round(time.Millisecond), f.p99.Round(time.Millisecond),
			f.max.Round(time.Millisecond), f.all.Round(time.Millisecond))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "redis:    redis-server %s, throwaway on %s (loopback, --save '' --appendonly no)\n", env.redisVersion, env.redisAddr)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}
