package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// printHTTP prints the tables of the http case, if it ran.
func printHTTP(w io.Writer, o options, res *results) {
	if len(res.http) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHTTP: wrk -t1 -c%d, %v per phase, %d-byte bodies; each server on a redis-server of its own with appendonly yes, appendfsync everysec; medians of %d runs (the servers' order reversed every run)\n\n",
		httpClients, o.httpDur, o.body, len(res.http[0].runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t")
	for _, r := range res.http {
		fmt.Fprintf(tw, "%s\t", r.server)
	}
	two := len(res.http) > 1
	if two {
		fmt.Fprintf(tw, "rmqd / lmstfy\t")
	}
	fmt.Fprintln(tw)
	// row prints one figure per server (the median of its runs) and, with
	// two, their ratio.
	row := func(name, unit string, v func(r httpRun) float64) {
		fmt.Fprintf(tw, "%s\t", name)
		var vals []float64
		for _, r := range res.http {
			f := 0.0
			if r.failed() != "" || len(r.runs) == 0 {
				fmt.Fprintf(tw, "FAILED\t")
			} else {
				f = medianOf(r.runs, v)
				switch unit {
				case "/s":
					fmt.Fprintf(tw, "%s/s\t", thousands(f))
				case "":
					fmt.Fprintf(tw, "%.2f\t", f)
				default:
					fmt.Fprintf(tw, "%.1f %s\t", f, unit)
				}
			}
			vals = append(vals, f)
		}
		if two {
			if unit != "" && vals[0] > 0 && vals[1] > 0 {
				fmt.Fprintf(tw, "%.2f×\t", vals[0]/vals[1])
			} else {
				fmt.Fprintf(tw, "—\t")
			}
		}
		fmt.Fprintln(tw)
	}
	perJob := func(n func(p httpPhase) int64, p func(r httpRun) httpPhase) func(r httpRun) float64 {
		return func(r httpRun) float64 {
			ph := p(r)
			if ph.jobs == 0 {
				return 0
			}
			return float64(n(ph)) / float64(ph.jobs)
		}
	}
	pub := func(r httpRun) httpPhase { return r.publish }
	con := func(r httpRun) httpPhase { return r.consume }
	cost := func(r httpRun) float64 { s, d := r.costPerJob(); return s + d }
	row("publish (PUT), jobs/s", "/s", func(r httpRun) float64 { return r.publish.rate })
	row("consume+ack (GET + DELETE), jobs/s", "/s", func(r httpRun) float64 { return r.consume.rate })
	row("server CPU per publish", "µs", func(r httpRun) float64 { return r.publish.perJob(r.publish.serverCPU) })
	row("server CPU per consume+ack", "µs", func(r httpRun) float64 { return r.consume.perJob(r.consume.serverCPU) })
	row("Redis CPU per publish", "µs", func(r httpRun) float64 { return r.publish.perJob(r.publish.redisCPU) })
	row("Redis CPU per consume+ack", "µs", func(r httpRun) float64 { return r.consume.perJob(r.consume.redisCPU) })
	row("server CPU per job", "µs", func(r httpRun) float64 { s, _ := r.costPerJob(); return s })
	row("Redis CPU per job", "µs", func(r httpRun) float64 { _, d := r.costPerJob(); return d })
	row("server + Redis CPU per job", "µs", cost)
	row("Redis commands per publish", "", perJob(func(p httpPhase) int64 { return p.redisCmds }, pub))
	row("Redis commands per consume+ack", "", perJob(func(p httpPhase) int64 { return p.redisCmds }, con))
	row("script calls per publish", "", perJob(func(p httpPhase) int64 { return p.scripts }, pub))
	row("script calls per consume+ack", "", perJob(func(p httpPhase) int64 { return p.scripts }, con))
	tw.Flush()
	fmt.Fprintln(w, "  (a job is a publish, a consume and an ack; CPU from /proc/<pid>/stat of the server and of its redis-server, divided by the jobs of the phase)")
	if two && res.http[0].failed() == "" && res.http[1].failed() == "" {
		// Each run's own ratios: how far the machine's load moved them.
		var costs, pubs, cons []string
		for i := range min(len(res.http[0].runs), len(res.http[1].runs)) {
			a, l := res.http[0].runs[i], res.http[1].runs[i]
			costs = append(costs, fmt.Sprintf("%.2f", cost(a)/cost(l)))
			pubs = append(pubs, fmt.Sprintf("%.2f", a.publish.rate/l.publish.rate))
			cons = append(cons, fmt.Sprintf("%.2f", a.consume.rate/l.consume.rate))
		}
		fmt.Fprintf(w, "  rmqd / lmstfy in each run: CPU per job %s; publish %s; consume+ack %s\n",
			strings.Join(costs, ", "), strings.Join(pubs, ", "), strings.Join(cons, ", "))
	}
	for _, r := range res.http {
		if e := r.failed(); e != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.server, e)
		}
		for _, x := range r.runs {
			for _, n := range []string{x.publish.note, x.consume.note} {
				if n != "" {
					fmt.Fprintf(w, "  %s: %s\n", r.server, n)
				}
			}
		}
	}
	for _, r := range res.http {
		if r.lat == nil {
			continue
		}
		l := r.lat
		fmt.Fprintf(w, "\n%s firing lateness over long poll: %s jobs due at %d/s over %v (at=, ms), %d Go clients with timeout=3\n",
			r.server, thousands(float64(l.sent)), httpLateRate, httpLateSpread, httpClients)
		fmt.Fprintf(w, "  delivered %d of %d, early %d, unknown %d; p50 %v, p99 %v, max %v (consume answer arrived − due instant)\n",
			l.fired, l.sent, l.early, l.extra, l.p50.Round(time.Microsecond), l.p99.Round(time.Microsecond), l.max.Round(time.Microsecond))
		fmt.Fprintf(w, "  publishing ended %v before the first due instant\n", l.margin.Round(time.Millisecond))
		if l.err != "" {
			fmt.Fprintf(w, "  FAILED: %s\n", l.err)
		}
	}
	if res.httpCeiling > 0 {
		fmt.Fprintf(w, "\nceiling: an empty net/http handler in the bench process under the same wrk PUTs: %s requests/s", thousands(res.httpCeiling))
		for _, r := range res.http {
			if r.server == "lmstfy" && r.failed() == "" && len(r.runs) > 0 {
				fmt.Fprintf(w, " (2× lmstfy's publish would be %s/s)", thousands(2*medianOf(r.runs, func(x httpRun) float64 { return x.publish.rate })))
			}
		}
		fmt.Fprintln(w)
	}
	if !two {
		fmt.Fprintln(w, "\nlmstfy: set LMSTFY_BIN to compare")
	} else {
		fmt.Fprintf(w, "\nlmstfy: LMSTFY_BIN=%s, on a redis-server of its own\n", os.Getenv("LMSTFY_BIN"))
	}
}

// printHTTPReport is the whole report when the http case ran alone.
func printHTTPReport(w io.Writer, o options, env environment, res *results) {
	printHTTP(w, o, res)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	built := "rmqd built from the " + env.rmqTree
	if b := os.Getenv("RMQD_BIN"); b != "" {
		built = "rmqd RMQD_BIN=" + b
	}
	fmt.Fprintf(w, "server:   %s; wrk 4 (-t1); redis-server %s\n", built, env.redisVersion)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}

// httpProblems lists what makes the bench exit 1 in the http case.
func httpProblems(res *results) []string {
	var p []string
	for _, r := range res.http {
		if e := r.failed(); e != "" {
			p = append(p, fmt.Sprintf("http %s: %s", r.server, e))
		}
		if r.lat != nil && (r.lat.err != "" || r.lat.early > 0) {
			p = append(p, fmt.Sprintf("http %s lateness: %d early %s", r.server, r.lat.early, r.lat.err))
		}
	}
	return p
}
