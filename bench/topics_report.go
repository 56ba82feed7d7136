package main

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"text/tabwriter"
	"time"
)

// printTopicsReport is the whole report when the topics case ran alone.
func printTopicsReport(w io.Writer, o options, env environment, res *results) {
	printTopics(w, o, res)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine:  %s, nproc %d, %s RAM, %s/%s, %s; load average %s before, %s after\n", env.cpuModel, runtime.NumCPU(), env.memTotal, runtime.GOOS, runtime.GOARCH, runtime.Version(), env.loadBefore, env.loadAfter)
	fmt.Fprintf(w, "redis:    redis-server %s, throwaway on %s (loopback, --save '' --appendonly no, maxclients %d)\n", env.redisVersion, env.redisAddr, topicsMaxClients(o))
	fmt.Fprintf(w, "client:   RMQ for Go %s; one go-redis %s client (pool 64, RESP%d)\n", env.rmqTree, env.goRedis, o.resp)
	fmt.Fprintf(w, "command:  %s   (took %v)\n", commandLine(o.rawArgs), env.elapsed.Round(time.Second))
}

// printTopics prints the table of the topics case, if it ran.
func printTopics(w io.Writer, o options, res *results) {
	if len(res.topics) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRMQ for Go, N topics on one client: FixedTime, %d slots, concurrency %d each\n\n", o.slots, topicConcurrency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "topics\tstart ᵃ\tidle client CPU ᵇ\tidle Redis cmds/s ᵇ\tRedis conns\tgoroutines/topic\tmemory/topic ᶜ\twave p50 / p99 / max ᵈ\tone topic p50 / p99 ᵈ\tp99 ratio\tclose\t\n")
	for _, r := range res.topics {
		cell := func(ok bool, s string) string {
			if !ok {
				return "—"
			}
			return s
		}
		idled := r.conns > 0 // the idle window was measured
		mem := "—"
		if idled && r.n >= 1000 {
			mem = fmt.Sprintf("%s B + %s B stack", thousands(r.heapPerTopic), thousands(r.stackPerTopic))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			thousands(float64(r.n)),
			cell(r.start > 0, durShort(r.start)),
			cell(idled, strconv.FormatFloat(r.idleCPU*100, 'f', 1, 64)+" %"),
			cell(idled, strconv.FormatFloat(r.idleCmds, 'f', 0, 64)),
			cell(idled, thousands(float64(r.conns))),
			cell(idled, strconv.FormatFloat(r.goroutines, 'f', 2, 64)),
			mem,
			waveCell(r.wave, true),
			waveCell(r.one, false)+fmt.Sprintf(" (conc. %s)", thousands(float64(r.oneConc))),
			cell(r.wave.fired > 0 && r.one.fired > 0, ratio(ms(r.wave.p99), ms(r.one.p99))),
			cell(r.close > 0, durShort(r.close)))
	}
	tw.Flush()

	for _, r := range res.topics {
		if r.n != 1000 || r.conns == 0 {
			continue
		}
		// The targets are for 1,000 topics on this machine.
		check := func(ok bool) string {
			if ok {
				return "met"
			}
			return "MISSED"
		}
		fmt.Fprintf(w, "\ntargets at 1,000 topics: start ≤ 200 ms %s; idle client CPU ≤ 1 %% %s; idle Redis ≤ 20 cmds/s %s;\n",
			check(r.start <= 200*time.Millisecond), check(r.idleCPU <= 0.01), check(r.idleCmds <= 20))
		fmt.Fprintf(w, "  wave p99 ≤ 15 ms %s, ≤ 1.5× one topic's %s; one topic's p99 ≤ 15 ms %s\n",
			check(r.wave.fired == r.n && r.wave.p99 <= 15*time.Millisecond),
			check(r.wave.fired == r.n && r.one.fired == r.n && float64(r.wave.p99) <= 1.5*float64(r.one.p99)),
			check(r.one.fired == r.n && r.one.p99 <= 15*time.Millisecond))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "ᵃ Register of every topic + Start, until Start returned.")
	fmt.Fprintf(w, "ᵇ over %v of idling (-topics-idle), %v after Start returned: this process's CPU time / wall time (100 %% = one core);\n", o.topicsIdle, topicsSettle)
	fmt.Fprintln(w, "  Redis INFO total_commands_processed delta / s, the bench's own INFO excluded. Redis conns = connected_clients (the bench's INFO connection included).")
	fmt.Fprintln(w, "ᶜ runtime.MemStats HeapInuse and StackInuse growth after GC (client created, topics registered and started, idle) / topics; N ≥ 1,000 only")
	fmt.Fprintln(w, "  (below, the client's fixed costs, e.g. its pooled connections, dominate).")
	fmt.Fprintf(w, "ᵈ handler call − due instant, full precision: N messages due at one instant (SendFixedTime from %d goroutines, done before it),\n", topicsSenders)
	fmt.Fprintf(w, "  one per topic; \"one topic\": the same N into one topic of a fresh client with concurrency N×%d, capped at %s.\n", topicConcurrency, thousands(oneTopicMaxConcurrency))
	for _, r := range res.topics {
		for _, x := range []struct {
			what string
			w    waveResult
		}{{"wave", r.wave}, {"one-topic wave", r.one}} {
			if x.w.sent == 0 {
				continue
			}
			if x.w.margin < 0 {
				fmt.Fprintf(w, "  note: %s topics, %s: the sends ended %v after the due instant\n", thousands(float64(r.n)), x.what, (-x.w.margin).Round(time.Millisecond))
			}
			if x.w.extra > 0 || x.w.early > 0 {
				fmt.Fprintf(w, "  note: %s topics, %s: %d duplicate deliveries, %d fired early\n", thousands(float64(r.n)), x.what, x.w.extra, x.w.early)
			}
		}
		if r.err != "" {
			fmt.Fprintf(w, "  note: %s topics: %s\n", thousands(float64(r.n)), r.err)
		}
	}
}

func waveCell(wr waveResult, withMax bool) string {
	if wr.sent == 0 || wr.fired == 0 {
		return "—"
	}
	s := fmtMs(ms(wr.p50)) + " / " + fmtMs(ms(wr.p99))
	if withMax {
		s += " / " + fmtMs(ms(wr.max))
	}
	if wr.fired < wr.sent {
		s += fmt.Sprintf(" (%d of %d fired)", wr.fired, wr.sent)
	}
	return s
}

// durShort formats a phase's duration: 368 ms, 1.84 s.
func durShort(d time.Duration) string {
	if d < time.Second {
		return fmtMs(ms(d))
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// topicsProblems lists what RMQ must never do in the topics case: lose a
// message of a wave, deliver one twice, fire one early.
func topicsProblems(res *results) []string {
	var out []string
	for _, r := range res.topics {
		for _, x := range []struct {
			what string
			w    waveResult
		}{{"wave", r.wave}, {"one-topic wave", r.one}} {
			if x.w.sent == 0 {
				continue
			}
			id := fmt.Sprintf("topics %d %s", r.n, x.what)
			if x.w.fired < x.w.sent {
				out = append(out, fmt.Sprintf("%s: %d of %d never fired", id, x.w.sent-x.w.fired, x.w.sent))
			}
			if x.w.extra > 0 {
				out = append(out, fmt.Sprintf("%s: %d duplicate deliveries", id, x.w.extra))
			}
			if x.w.early > 0 {
				out = append(out, fmt.Sprintf("%s: %d fired early", id, x.w.early))
			}
		}
	}
	return out
}

// jsonTopics is one N of the topics case in the -json report.
type jsonTopics struct {
	Topics          int       `json:"topics"`
	RegisterMs      float64   `json:"register_ms"`
	StartMs         float64   `json:"start_ms"` // Register + Start
	CloseMs         float64   `json:"close_ms"`
	IdleCPU         float64   `json:"idle_client_cpu"` // 1 = one core
	IdleRedisCmds   float64   `json:"idle_redis_cmds_per_sec"`
	RedisConns      int64     `json:"redis_connected_clients"`
	GoroutinesTopic float64   `json:"goroutines_per_topic"`
	HeapPerTopic    float64   `json:"heap_bytes_per_topic"`
	StackPerTopic   float64   `json:"stack_bytes_per_topic"`
	Wave            *jsonWave `json:"wave,omitempty"`
	OneTopic        *jsonWave `json:"one_topic,omitempty"`
	OneConcurrency  int       `json:"one_topic_concurrency"`
	Error           string    `json:"error,omitempty"`
}

type jsonWave struct {
	Sent       int      `json:"sent"`
	Fired      int      `json:"fired"`
	Duplicates int      `json:"duplicates"`
	Early      int      `json:"early"`
	P50Ms      *float64 `json:"p50_ms"`
	P99Ms      *float64 `json:"p99_ms"`
	MaxMs      *float64 `json:"max_ms"`
	MarginMs   float64  `json:"send_margin_ms"` // last send returned this long before the due instant
}

func jsonTopicsOf(res *results) []jsonTopics {
	var out []jsonTopics
	wave := func(w waveResult) *jsonWave {
		if w.sent == 0 {
			return nil
		}
		return &jsonWave{Sent: w.sent, Fired: w.fired, Duplicates: w.extra, Early: w.early,
			P50Ms: finite(ms(w.p50)), P99Ms: finite(ms(w.p99)), MaxMs: finite(ms(w.max)), MarginMs: ms(w.margin)}
	}
	for _, r := range res.topics {
		out = append(out, jsonTopics{
			Topics: r.n, RegisterMs: ms(r.register), StartMs: ms(r.start), CloseMs: ms(r.close),
			IdleCPU: r.idleCPU, IdleRedisCmds: r.idleCmds, RedisConns: r.conns,
			GoroutinesTopic: r.goroutines, HeapPerTopic: r.heapPerTopic, StackPerTopic: r.stackPerTopic,
			Wave: wave(r.wave), OneTopic: wave(r.one), OneConcurrency: r.oneConc, Error: r.err,
		})
	}
	return out
}
