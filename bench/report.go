package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/topic"
)

type environment struct {
	cpuModel     string
	memTotal     string
	redisVersion string
	redisAddr    string
	asynqVersion string
	bullmq       string // "BullMQ 6.7.0 on Node v20.20.2" when it ran
	goRedis      string
	rmqTree      string
	loadBefore   string
	loadAfter    string
	elapsed      time.Duration
}

func readEnv(ctx context.Context, admin *redis.Client, addr string) environment {
	e := environment{cpuModel: "?", memTotal: "?", redisVersion: "?", redisAddr: addr, asynqVersion: "?", goRedis: "?", rmqTree: "working tree", loadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				e.memTotal = fmt.Sprintf("%.0f GiB", kb/(1<<20))
			}
		}
	}
	if info, err := admin.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				e.redisVersion = v
			}
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/hibiken/asynq":
				e.asynqVersion = d.Version
			case "github.com/redis/go-redis/v9":
				e.goRedis = d.Version
			}
		}
	}
	// The library is built from the working tree (replace ../).
	if out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output(); err == nil {
		e.rmqTree = "working tree at " + strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			e.rmqTree += " + uncommitted changes"
		}
	}
	return e
}

// loadAvg returns the 1-minute load average: other work on the machine
// skews every figure.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// commandLine reconstructs how the benchmark was started.
func commandLine(args []string) string {
	prog := filepath.Base(os.Args[0])
	if strings.Contains(os.Args[0], "go-build") {
		prog = "go run ."
	} else {
		prog = "./" + prog
	}
	q := []string{prog}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return "(cd bench && " + strings.Join(q, " ") + ")"
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return median(v)
}

// thousands formats f as an integer with thousands separators.
func thousands(f float64) string {
	if math.IsNaN(f) {
		return "—"
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtMs(d float64) string {
	switch {
	case math.IsNaN(d):
		return "—"
	case math.IsInf(d, 1) || d > 1e12:
		return "never fired"
	case math.Abs(d) < 10:
		return strconv.FormatFloat(d, 'f', 2, 64) + " ms"
	case math.Abs(d) < 100:
		return strconv.FormatFloat(d, 'f', 1, 64) + " ms"
	}
	return thousands(d) + " ms"
}

func ms(d time.Duration) float64 {
	if d == time.Duration(math.MaxInt64) {
		return math.Inf(1)
	}
	return float64(d) / float64(time.Millisecond)
}

// ratio formats how many times better b (RMQ) is than a (asynq).
func ratio(better, worse float64) string {
	if math.IsNaN(better) || math.IsNaN(worse) || better <= 0 || worse <= 0 || math.IsInf(better, 0) || math.IsInf(worse, 0) {
		return "—"
	}
	r := better / worse
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 0, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "×"
}

type row struct {
	name, asynq, rmq, adv, target string
	bull, badv                    string // BullMQ and RMQ's ratio to it, when BullMQ ran
}

func printReport(w io.Writer, o options, env environment, systems []system, res *results) {
	asys, rsys, rtype := compared(systems)
	bsys := bullName(systems)
	aName := "asynq " + env.asynqVersion
	vs := "hibiken/asynq"
	if bsys != "" {
		vs += " and BullMQ"
	}
	fmt.Fprintf(w, "\nRMQ for Go vs %s — one invocation, one throwaway redis-server, %d-byte bodies, medians of %d runs\n\n", vs, o.body, o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(r row) {
		if bsys == "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.name, r.asynq, r.rmq, r.adv, r.target)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, r.asynq, r.bull, r.rmq, r.adv, r.badv, r.target)
		}
	}
	line(row{"case", aName, "RMQ for Go", "RMQ better by", "target", bsys, "RMQ vs BullMQ"})
	line(row{"----", "----", "----", "----", "----", "----", "----"})
	rate := func(id, sys string) (float64, string, bool) {
		smp := res.lookup(id, sys)
		switch {
		case smp == nil:
			return math.NaN(), "not run", false
		case smp.unsupported && id == "consumepf":
			return math.NaN(), "n/a (no prefetch)", true
		case smp.unsupported:
			return math.NaN(), "n/a (no batch API)", true
		}
		v := medianOf(smp.costs, func(c costs) float64 { return c.rate })
		return v, thousands(v) + " msg/s", false
	}
	target := func(ok bool, t string) string {
		if t == "" {
			return ""
		}
		if ok {
			return t + "  met"
		}
		return t + "  MISSED"
	}
	var rows []row
	// A case asynq has no API for is compared with its nearest one: batch
	// with its 32-goroutine Enqueue (¹), prefetch with its plain consume (⁵).
	type near struct{ id, mark string }
	nearest := map[string]near{"batch": {"produce32", "¹"}, "consumepf": {"consume", "⁵"}}
	tp := func(id, label, tgt string, min float64) {
		if !o.cases[id] {
			return
		}
		_, as, _ := rate(id, asys)
		rv, rs, _ := rate(id, rsys)
		_, bs, _ := rate(id, bsys)
		// RMQ's ratio to sys, or, where sys has no API for the case, to
		// its nearest one (marked).
		against := func(sys string) string {
			v, _, unsup := rate(id, sys)
			if n, ok := nearest[id]; unsup && ok {
				if v, _, _ := rate(n.id, sys); !math.IsNaN(v) {
					return ratio(rv, v) + " " + n.mark
				}
			}
			return ratio(rv, v)
		}
		t := ""
		if tgt != "" && !math.IsNaN(rv) {
			t = target(rv >= min, tgt)
		}
		rows = append(rows, row{label, as, rs, against(asys), t, bs, against(bsys)})
	}
	tp("produce1", "produce, single calls, 1 goroutine", "", 0)
	tp("produce32", fmt.Sprintf("produce, single calls, %d goroutines", o.producers), "≥ 40,000", 40000)
	tp("batch", fmt.Sprintf("produce, batch API (%d per call, %d goroutines)", o.batch, o.batchG), "≥ 100,000", 100000)
	tp("consume", fmt.Sprintf("consume+ack, no-op handler, %d workers, defaults", o.workers), "≥ 50,000", 50000)
	tp("consumepf", fmt.Sprintf("consume+ack, as above, RMQ WithPrefetch(%d)", o.prefetch), "≥ 50,000", 50000)

	latRows := func(prefix, id string, ls latSpec, tgtP50, tgtP99 float64) {
		a, r, b := res.lookup(id, asys), res.lookup(id, rsys), res.lookup(id, bsys)
		if a == nil && r == nil && b == nil {
			return
		}
		get := func(s *sample, f func(latResult) float64) float64 {
			if s == nil || len(s.lat) == 0 {
				return math.NaN()
			}
			return medianOf(s.lat, f)
		}
		label := fmt.Sprintf("%slateness @ %s msg/s due", prefix, thousands(float64(ls.rate)))
		for _, q := range []struct {
			name string
			f    func(latResult) float64
			tgt  float64
		}{
			{"p50", func(l latResult) float64 { return ms(l.p50) }, tgtP50},
			{"p99", func(l latResult) float64 { return ms(l.p99) }, tgtP99},
			{"max", func(l latResult) float64 { return ms(l.max) }, 0},
		} {
			av, rv := get(a, q.f), get(r, q.f)
			t := ""
			if q.tgt > 0 && !math.IsNaN(rv) {
				t = target(rv <= q.tgt, fmt.Sprintf("≤ %g ms", q.tgt))
			}
			bv := get(b, q.f)
			rows = append(rows, row{label + ", " + q.name, latCell(a, av), fmtMs(rv), ratio(av, rv), t, latCell(b, bv), ratio(bv, rv)})
		}
		early := func(s *sample) (string, int) {
			if s == nil {
				return "not run", 0
			}
			e, f := 0, 0
			for _, l := range s.lat {
				e += l.early
				f += l.fired
			}
			return fmt.Sprintf("%s of %s", thousands(float64(e)), thousands(float64(f))), e
		}
		as, _ := early(a)
		rs, re := early(r)
		bs, _ := early(b)
		t := ""
		if r != nil {
			t = target(re == 0, "0")
		}
		rows = append(rows, row{label + ", early ²", as, rs, "", t, bs, ""})
	}
	if o.cases["lateness"] {
		for _, ls := range o.late {
			p50, p99 := 0.0, 0.0
			switch {
			case ls.rate <= 1000:
				p50, p99 = 2, 5
			case ls.rate <= 20000:
				p99 = 20
			}
			latRows("", "late:"+strconv.Itoa(ls.rate), ls, p50, p99)
		}
	}
	if o.waiting > 0 {
		for _, ls := range o.late {
			latRows(count(o.waiting)+" waiting: ", "huge:"+strconv.Itoa(ls.rate), ls, 0, 0)
		}
	}
	if o.cases["memory"] && o.memN > 0 {
		get := func(sys string) (float64, string) {
			s := res.lookup("memory", sys)
			if s == nil {
				return math.NaN(), "not run"
			}
			return s.memPerMsg, thousands(s.memPerMsg) + " B"
		}
		av, as := get(asys)
		rv, rs := get(rsys)
		bv, bs := get(bsys)
		t := ""
		if !math.IsNaN(rv) {
			t = target(rv <= 300, "≤ 300 B")
		}
		rows = append(rows, row{fmt.Sprintf("Redis memory per waiting message (%s waiting) ³", thousands(float64(o.memN))), as, rs, ratio(av, rv), t, bs, ratio(bv, rv)})
	}
	for _, r := range rows {
		line(r)
	}
	tw.Flush()

	// Per-message costs of the throughput cases.
	if !o.cases["produce1"] && !o.cases["produce32"] && !o.cases["batch"] && !o.cases["consume"] && !o.cases["consumepf"] {
		printTypes(w, o, systems, res)
		printTopics(w, o, res)
		printFooter(w, o, env, aName, asys, rtype, res)
		return
	}
	systemsOrder := []string{asys, bsys, rsys}
	fmt.Fprintf(w, "\nPer message, same timed sections (medians):\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tsystem\tmsg/s\tRedis cmds ⁴\tscript calls\tround trips\twire bytes\tclient CPU µs\tRedis CPU µs\t\n")
	for _, id := range []string{"produce1", "produce32", "batch", "consume", "consumepf"} {
		for _, sys := range systemsOrder {
			s := res.lookup(id, sys)
			if s == nil || len(s.costs) == 0 {
				continue
			}
			med := func(f func(costs) float64) float64 { return medianOf(s.costs, f) }
			short := shortName(sys, rsys, bsys)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.3f\t%.3f\t%s\t%.1f\t%.1f\t\n", id, short,
				thousands(med(func(c costs) float64 { return c.rate })),
				med(func(c costs) float64 { return c.redisCmds }),
				med(func(c costs) float64 { return c.scriptCalls }),
				med(func(c costs) float64 { return c.trips }),
				thousands(med(func(c costs) float64 { return c.wireBytes })),
				med(func(c costs) float64 { return c.clientCPUus }),
				med(func(c costs) float64 { return c.redisCPUus }))
		}
	}
	tw.Flush()

	if o.cmdStats {
		printCmdStats(w, res, systemsOrder, rsys, bsys)
	}
	printTypes(w, o, systems, res)
	printTopics(w, o, res)
	printFooter(w, o, env, aName, asys, rtype, res)
}

// compared returns the names of the two systems the main table compares:
// asynq and the first RMQ system (FixedTime when it ran), and the RMQ
// system's message type.
func compared(systems []system) (asys, rsys string, rtype topic.Type) {
	for _, s := range systems {
		switch s := s.(type) {
		case *asynqSys:
			asys = s.name()
		case *rmqSys:
			if rsys == "" {
				rsys, rtype = s.name(), s.typ
			}
		}
	}
	return asys, rsys, rtype
}

// typeName spells a message type as the Go constant does.
func typeName(t topic.Type) string {
	switch t {
	case topic.RangeMerge:
		return "RangeMerge"
	case topic.Priority:
		return "Priority"
	}
	return "FixedTime"
}

// count formats a message count: 10M, 1.5M, 200,000.
func count(n int) string {
	if n >= 1_000_000 && n%100_000 == 0 {
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	}
	return thousands(float64(n))
}

func printFooter(w io.Writer, o options, env environment, aName, asys string, rtype topic.Type, res *results) {
	fmt.Fprintln(w)
	if o.cases["batch"] && asys != "" {
		fmt.Fprintln(w, "¹ asynq has no batch enqueue; the ratio is against its 32-goroutine Enqueue.")
	}
	lead := fmt.Sprintf("%v", o.lead)
	fmt.Fprintf(w, "² lateness = handler call − due time (whole ms, asynq ProcessAt / RMQ SendFixedTime, each sent %s ahead from %d goroutines);\n", lead, o.producers)
	fmt.Fprintf(w, "  early = fired before the due time, summed over the runs (of all fired).")
	switch {
	case asys == "":
		fmt.Fprintln(w)
	case o.asynqCheck == 0:
		fmt.Fprintln(w, " asynq: default check intervals (TaskCheckInterval 1s, DelayedTaskCheckInterval 5s).")
	default:
		fmt.Fprintf(w, " asynq: TaskCheckInterval = DelayedTaskCheckInterval = %v.\n", o.asynqCheck)
	}
	var lags []string
	for id, bySys := range res.m {
		for sys, s := range bySys {
			for _, l := range s.lat {
				if l.sendLag > o.lead/2 {
					lags = append(lags, fmt.Sprintf("%s %s: sends fell %v behind", sys, id, l.sendLag.Round(time.Millisecond)))
				}
				if l.fired < l.sent {
					lags = append(lags, fmt.Sprintf("%s %s: %d of %d never fired", sys, id, l.sent-l.fired, l.sent))
				}
				if l.extra > 0 {
					lags = append(lags, fmt.Sprintf("%s %s: %d duplicate deliveries", sys, id, l.extra))
				}
			}
			if s.loadRate > 0 {
				lags = append(lags, fmt.Sprintf("%s %s: far-future messages loaded at %s msg/s", sys, id, thousands(s.loadRate)))
			}
		}
	}
	slices.Sort(lags)
	lags = slices.Compact(lags)
	for _, l := range lags {
		fmt.Fprintln(w, "  note:", l)
	}
	fmt.Fprintln(w, "³ INFO memory used_memory growth (client buffers excluded) / messages, far-future messages (asynq: scheduled tasks).")
	fmt.Fprintln(w, "⁴ commands Redis ran (INFO commandstats, the ones inside scripts included); round trips = client requests (a pipeline is one);")
	fmt.Fprintln(w, "  wire bytes = both directions incl. wake-up publishes; client CPU = this whole process; Redis CPU = INFO cpu.")
	printBullFootnote(w, env)
	if o.cases["consumepf"] && asys != "" {
		fmt.Fprintln(w, "⁵ asynq has no prefetch setting (each worker dequeues one task); the ratio is against its consume row.")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "redis:    redis-server %s, throwaway on %s (loopback, --save '' --appendonly no)\n", env.redisVersion, env.redisAddr)
	fmt.Fprintf(w, "clients:  %s; RMQ for Go %s; one go-redis %s client (pool 64, RESP%d) for both\n", aName, env.rmqTree, env.goRedis, o.resp)
	fmt.Fprintf(w, "settings: runs=%d n=%d batch-n=%d body=%dB RMQ %s topics of %d slots, workers=%d, consumepf prefetch=%d\n", o.runs, o.n, o.batchN, o.body, typeName(rtype), o.slots, o.workers, o.prefetch)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}

// printCmdStats lists, per throughput case and system, the commands Redis
// ran per message (INFO commandstats), most time first. Script calls
// (evalsha) include the time of the commands they run.
func printCmdStats(w io.Writer, res *results, order []string, rsys, bsys string) {
	fmt.Fprintf(w, "\nINFO commandstats per message (medians; evalsha includes the commands its scripts run):\n")
	for _, id := range []string{"produce1", "produce32", "batch", "consume", "consumepf"} {
		for _, sys := range order {
			s := res.lookup(id, sys)
			if s == nil || len(s.costs) == 0 {
				continue
			}
			names := map[string]bool{}
			for _, c := range s.costs {
				for n := range c.perCmd {
					names[n] = true
				}
			}
			type line struct {
				name        string
				calls, usec float64
			}
			var lines []line
			var inner float64
			for n := range names {
				l := line{n,
					medianOf(s.costs, func(c costs) float64 { return c.perCmd[n][0] }),
					medianOf(s.costs, func(c costs) float64 { return c.perCmd[n][1] })}
				if l.calls < 0.0005 {
					continue
				}
				lines = append(lines, l)
				if !strings.HasPrefix(n, "eval") {
					inner += l.usec
				}
			}
			slices.SortFunc(lines, func(a, b line) int {
				if a.usec != b.usec {
					if a.usec > b.usec {
						return -1
					}
					return 1
				}
				return strings.Compare(a.name, b.name)
			})
			var parts []string
			for _, l := range lines {
				parts = append(parts, fmt.Sprintf("%s %.3g×/%.2fµs", l.name, l.calls, l.usec))
			}
			fmt.Fprintf(w, "  %-9s %-6s redis CPU %.1fµs: %s\n", id, shortName(sys, rsys, bsys),
				medianOf(s.costs, func(c costs) float64 { return c.redisCPUus }), strings.Join(parts, ", "))
		}
	}
}
