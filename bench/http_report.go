package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
	"time"
)

// printHTTP prints the table of the http case, if it ran.
func printHTTP(w io.Writer, o options, res *results) {
	if len(res.http) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHTTP (issue 12): %d clients, %d-byte bodies, %s jobs; Redis with appendonly yes, appendfsync everysec; one run\n\n",
		httpClients, o.body, thousands(float64(o.httpN)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\t")
	for _, r := range res.http {
		fmt.Fprintf(tw, "%s\t", r.server)
	}
	if len(res.http) > 1 {
		fmt.Fprintf(tw, "rmqd / lmstfy\t")
	}
	fmt.Fprintln(tw)
	row := func(name string, v func(r httpServerResult) (float64, string)) {
		fmt.Fprintf(tw, "%s\t", name)
		var vals []float64
		for _, r := range res.http {
			f, e := v(r)
			if e != "" {
				fmt.Fprintf(tw, "FAILED\t")
				f = 0
			} else {
				fmt.Fprintf(tw, "%s/s\t", thousands(f))
			}
			vals = append(vals, f)
		}
		if len(vals) > 1 {
			if vals[0] > 0 && vals[1] > 0 {
				fmt.Fprintf(tw, "%.2f×\t", vals[0]/vals[1])
			} else {
				fmt.Fprintf(tw, "—\t")
			}
		}
		fmt.Fprintln(tw)
	}
	row("publish (PUT)", func(r httpServerResult) (float64, string) { return r.publish, r.pubErr })
	row("consume+ack (GET timeout=1 + DELETE)", func(r httpServerResult) (float64, string) {
		if r.pubErr != "" {
			return 0, "skipped"
		}
		return r.consume, r.conErr
	})
	tw.Flush()
	for _, r := range res.http {
		for _, e := range []string{r.pubErr, r.conErr} {
			if e != "" {
				fmt.Fprintf(w, "  %s: %s\n", r.server, e)
			}
		}
		if r.lat == nil {
			continue
		}
		l := r.lat
		fmt.Fprintf(w, "\n%s firing lateness over long poll: %s jobs due at %d/s over %v (at=, ms), %d consumers with timeout=3\n",
			r.server, thousands(float64(l.sent)), httpLateRate, httpLateSpread, httpClients)
		fmt.Fprintf(w, "  delivered %d of %d, early %d, unknown %d; p50 %v, p99 %v, max %v (consume answer arrived − due instant)\n",
			l.fired, l.sent, l.early, l.extra, l.p50.Round(time.Microsecond), l.p99.Round(time.Microsecond), l.max.Round(time.Microsecond))
		fmt.Fprintf(w, "  publishing ended %v before the first due instant\n", l.margin.Round(time.Millisecond))
		if l.err != "" {
			fmt.Fprintf(w, "  FAILED: %s\n", l.err)
		}
	}
	if res.httpCeiling > 0 {
		fmt.Fprintf(w, "\nceiling: an empty net/http handler in the bench process, same client and PUTs: %s/s", thousands(res.httpCeiling))
		for _, r := range res.http {
			if r.server == "lmstfy" && r.publish > 0 {
				fmt.Fprintf(w, " (3× lmstfy's publish would be %s/s)", thousands(3*r.publish))
			}
		}
		fmt.Fprintln(w)
	}
	if len(res.http) == 1 {
		fmt.Fprintln(w, "\nlmstfy: set LMSTFY_BIN to compare")
	} else {
		fmt.Fprintf(w, "\nlmstfy: LMSTFY_BIN=%s, on the same Redis (flushed in between), after rmqd\n", os.Getenv("LMSTFY_BIN"))
	}
}

// printHTTPReport is the whole report when the http case ran alone.
func printHTTPReport(w io.Writer, o options, env environment, res *results) {
	printHTTP(w, o, res)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "server:   rmqd built from the %s; Go net/http clients (MaxIdleConnsPerHost 64); redis-server %s\n", env.rmqTree, env.redisVersion)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}

// httpProblems lists what makes the bench exit 1 in the http case.
func httpProblems(res *results) []string {
	var p []string
	for _, r := range res.http {
		if r.pubErr != "" || r.conErr != "" {
			p = append(p, fmt.Sprintf("http %s: %s%s", r.server, r.pubErr, r.conErr))
		}
		if r.lat != nil && (r.lat.err != "" || r.lat.early > 0) {
			p = append(p, fmt.Sprintf("http %s lateness: %d early %s", r.server, r.lat.early, r.lat.err))
		}
	}
	return p
}
