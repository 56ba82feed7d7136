package main

import (
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"strings"
)

// The -json report: the same figures as the tables, medians over the runs,
// one entry per case and system, for scripts that compare runs.

type jsonReport struct {
	Command string `json:"command"`
	// Incomplete is the error that stopped the run early; the results are
	// what was measured before it.
	Incomplete  string       `json:"incomplete,omitempty"`
	Environment jsonEnv      `json:"environment"`
	Settings    jsonSettings `json:"settings"`
	Results     []jsonResult `json:"results"`
	Topics      []jsonTopics `json:"topics,omitempty"` // the topics case
}

type jsonEnv struct {
	CPU          string  `json:"cpu"`
	CPUs         int     `json:"cpus"`
	Memory       string  `json:"memory"`
	OS           string  `json:"os"`
	Go           string  `json:"go"`
	RedisVersion string  `json:"redis_version"`
	RedisAddr    string  `json:"redis_addr"`
	Asynq        string  `json:"asynq"`
	BullMQ       string  `json:"bullmq,omitempty"` // BullMQ and Node versions, when it ran
	GoRedis      string  `json:"go_redis"`
	RMQ          string  `json:"rmq"`
	LoadBefore   string  `json:"load_before"`
	LoadAfter    string  `json:"load_after"`
	ElapsedS     float64 `json:"elapsed_s"`
}

type jsonLateSpec struct {
	Rate      int     `json:"rate"`
	DurationS float64 `json:"duration_s"`
}

type jsonSettings struct {
	Runs            int            `json:"runs"`
	N               int            `json:"n"`
	BatchN          int            `json:"batch_n"`
	Batch           int            `json:"batch"`
	BatchGoroutines int            `json:"batch_goroutines"`
	Producers       int            `json:"producers"`
	Workers         int            `json:"workers"`
	Prefetch        int            `json:"prefetch"`
	BodyBytes       int            `json:"body_bytes"`
	Slots           int            `json:"slots"`
	Late            []jsonLateSpec `json:"late"`
	LeadS           float64        `json:"lead_s"`
	MemN            int            `json:"mem_n"`
	Waiting         int            `json:"waiting"`
	AsynqCheckS     float64        `json:"asynq_check_s"`
	RESP            int            `json:"resp"`
}

type jsonResult struct {
	Case   string `json:"case"`   // produce1 … consumepf, late:<rate>, huge:<rate>, memory
	System string `json:"system"` // asynq, rmq (FixedTime), rmq-rangemerge, rmq-priority
	// Unsupported: the system has no API for the case.
	Unsupported bool         `json:"unsupported,omitempty"`
	Throughput  *jsonCosts   `json:"throughput,omitempty"`
	Lateness    *jsonLatency `json:"lateness,omitempty"`
	Memory      *jsonMemory  `json:"memory,omitempty"`
}

// jsonCosts are medians per message over the runs; MsgsPerSecRuns lists
// every run.
type jsonCosts struct {
	MsgsPerSec      float64   `json:"msgs_per_sec"`
	MsgsPerSecRuns  []float64 `json:"msgs_per_sec_runs"`
	RedisCommands   float64   `json:"redis_commands"`
	ScriptCalls     float64   `json:"script_calls"`
	RoundTrips      float64   `json:"round_trips"`
	WireBytes       float64   `json:"wire_bytes"`
	ClientCPUMicros float64   `json:"client_cpu_us"`
	RedisCPUMicros  float64   `json:"redis_cpu_us"`
}

// jsonLatency: medians of p50, p99 and max over the runs (null when some
// message never fired), sums of the counts.
type jsonLatency struct {
	Rate       int      `json:"rate"`
	DurationS  float64  `json:"duration_s"`
	Waiting    int      `json:"waiting"`
	Sent       int      `json:"sent"`
	Fired      int      `json:"fired"`
	Duplicates int      `json:"duplicates"`
	Early      int      `json:"early"`
	P50Ms      *float64 `json:"p50_ms"`
	P99Ms      *float64 `json:"p99_ms"`
	MaxMs      *float64 `json:"max_ms"`
	LoadRate   float64  `json:"load_msgs_per_sec,omitempty"` // waiting messages loaded at
}

type jsonMemory struct {
	Messages    int     `json:"messages"`
	BytesPerMsg float64 `json:"bytes_per_msg"`
}

func printJSON(w io.Writer, o options, env environment, systems []system, res *results, runErr error) error {
	rep := jsonReport{
		Command: commandLine(o.rawArgs),
		Environment: jsonEnv{
			CPU: env.cpuModel, CPUs: runtime.NumCPU(), Memory: env.memTotal, OS: runtime.GOOS + "/" + runtime.GOARCH,
			Go: runtime.Version(), RedisVersion: env.redisVersion, RedisAddr: env.redisAddr, Asynq: env.asynqVersion,
			BullMQ:  env.bullmq,
			GoRedis: env.goRedis, RMQ: env.rmqTree, LoadBefore: env.loadBefore, LoadAfter: env.loadAfter,
			ElapsedS: env.elapsed.Seconds(),
		},
		Settings: jsonSettings{
			Runs: o.runs, N: o.n, BatchN: o.batchN, Batch: o.batch, BatchGoroutines: o.batchG, Producers: o.producers,
			Workers: o.workers, Prefetch: o.prefetch, BodyBytes: o.body, Slots: o.slots, LeadS: o.lead.Seconds(),
			MemN: o.memN, Waiting: o.waiting, AsynqCheckS: o.asynqCheck.Seconds(), RESP: o.resp,
		},
		Results: []jsonResult{},
	}
	if runErr != nil {
		rep.Incomplete = runErr.Error()
	}
	ids := []string{"produce1", "produce32", "batch", "consume", "consumepf"}
	for _, ls := range o.late {
		rep.Settings.Late = append(rep.Settings.Late, jsonLateSpec{ls.rate, ls.duration.Seconds()})
		ids = append(ids, "late:"+strconv.Itoa(ls.rate))
	}
	for _, ls := range o.late {
		ids = append(ids, "huge:"+strconv.Itoa(ls.rate))
	}
	ids = append(ids, "memory")
	for _, id := range ids {
		for _, sys := range systems {
			s := res.lookup(id, sys.name())
			if s == nil {
				continue
			}
			r := jsonResult{Case: id, System: sys.id(), Unsupported: s.unsupported}
			switch {
			case len(s.costs) > 0:
				r.Throughput = jsonCostsOf(s.costs)
			case len(s.lat) > 0:
				r.Lateness = jsonLatencyOf(o, id, s)
			case id == "memory":
				r.Memory = &jsonMemory{Messages: s.memN, BytesPerMsg: s.memPerMsg}
			}
			rep.Results = append(rep.Results, r)
		}
	}
	rep.Topics = jsonTopicsOf(res)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

func jsonCostsOf(cs []costs) *jsonCosts {
	med := func(f func(costs) float64) float64 { return medianOf(cs, f) }
	c := &jsonCosts{
		MsgsPerSec:      med(func(c costs) float64 { return c.rate }),
		RedisCommands:   med(func(c costs) float64 { return c.redisCmds }),
		ScriptCalls:     med(func(c costs) float64 { return c.scriptCalls }),
		RoundTrips:      med(func(c costs) float64 { return c.trips }),
		WireBytes:       med(func(c costs) float64 { return c.wireBytes }),
		ClientCPUMicros: med(func(c costs) float64 { return c.clientCPUus }),
		RedisCPUMicros:  med(func(c costs) float64 { return c.redisCPUus }),
	}
	for _, x := range cs {
		c.MsgsPerSecRuns = append(c.MsgsPerSecRuns, x.rate)
	}
	return c
}

func jsonLatencyOf(o options, id string, s *sample) *jsonLatency {
	prefix, rateStr, _ := strings.Cut(id, ":")
	rate, _ := strconv.Atoi(rateStr)
	l := &jsonLatency{Rate: rate, LoadRate: s.loadRate}
	for _, ls := range o.late {
		if ls.rate == rate {
			l.DurationS = ls.duration.Seconds()
		}
	}
	if prefix == "huge" {
		l.Waiting = o.waiting
	}
	for _, r := range s.lat {
		l.Sent += r.sent
		l.Fired += r.fired
		l.Duplicates += r.extra
		l.Early += r.early
	}
	l.P50Ms = finite(medianOf(s.lat, func(r latResult) float64 { return ms(r.p50) }))
	l.P99Ms = finite(medianOf(s.lat, func(r latResult) float64 { return ms(r.p99) }))
	l.MaxMs = finite(medianOf(s.lat, func(r latResult) float64 { return ms(r.max) }))
	return l
}
