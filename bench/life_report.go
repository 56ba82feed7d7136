package main

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// printLifeReport prints the life case (life.go).
func printLifeReport(w io.Writer, o options, env environment, res *results) {
	r := res.life
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nA job's life: consume+ack of %d messages with a 16-byte result, %d handlers, %d slots, %d-byte bodies; medians of %d runs\n",
		o.n, o.workers, o.slots, o.body, o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tmsgs/s\tvs off\tRedis µs/msg\tRedis cmds/msg\tclient µs/msg\t")
	rate := func(c costs) float64 { return c.rate }
	base := medianOf(r.consume["off"], rate)
	for _, v := range lifeVariants() {
		cs := r.consume[v.id]
		mr := medianOf(cs, rate)
		vs := ""
		if v.id != "off" && base > 0 {
			vs = fmt.Sprintf("%.0f %%", 100*mr/base)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.1f\t%.2f\t%.1f\t\n", v.label, mr, vs,
			medianOf(cs, func(c costs) float64 { return c.redisCPUus }),
			medianOf(cs, func(c costs) float64 { return c.redisCmds }),
			medianOf(cs, func(c costs) float64 { return c.clientCPUus }))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nLatency over %d messages each:\n", lifeSamples)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tp50\tp99\tmax\t")
	for _, l := range []struct {
		name string
		ds   []time.Duration
		err  string
	}{
		{"Wait: handler returned -> Wait returned", r.wait, r.waitErr},
		{"Cancel called -> handler's ctx done", r.cancel, r.cancErr},
		{"Wait, handler in another process", r.waitProcs, r.waitProcsErr},
		{"Cancel, handler in another process", r.cancelProcs, r.cancelProcsErr},
	} {
		name := l.name
		if l.err != "" {
			name += " (" + l.err + ")"
		}
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t\n", name, pct(l.ds, 0.5).Round(10*time.Microsecond), pct(l.ds, 0.99).Round(10*time.Microsecond), pct(l.ds, 1).Round(10*time.Microsecond))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "redis:    redis-server %s, throwaway on %s (loopback, --save '' --appendonly no)\n", env.redisVersion, env.redisAddr)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}
