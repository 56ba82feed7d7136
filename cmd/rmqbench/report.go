package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

type report struct {
	Env     environment `json:"environment"`
	Config  config      `json:"config"`
	Results []result    `json:"results"`
}

type environment struct {
	Redis        string `json:"redis"`
	RedisVersion string `json:"redis_version"`
	Throwaway    bool   `json:"throwaway_server"`
	Go           string `json:"go"`
	OS           string `json:"os"`
	CPUs         int    `json:"cpus"`
}

type config struct {
	N              int     `json:"n"`
	Producers      int     `json:"producers"`
	Concurrency    int     `json:"concurrency"`
	Prefetch       int     `json:"prefetch"`
	BodyBytes      int     `json:"body_bytes"`
	Slots          int     `json:"slots"`
	BatchSize      int     `json:"batch_size"`
	BatchProducers int     `json:"batch_producers"`
	MemN           int     `json:"memory_messages"`
	DurationS      float64 `json:"lateness_duration_s"`
	Rates          []int   `json:"lateness_rates"`
	LeadS          float64 `json:"lateness_lead_s"`
	Waiting        int     `json:"lateness_waiting"`
}

func configOf(o options) config {
	return config{
		N: o.n, Producers: o.producers, Concurrency: o.concurrency, Prefetch: o.prefetch, BodyBytes: o.body, Slots: o.slots,
		BatchSize: o.batchSize, BatchProducers: o.batchProd, MemN: o.memN,
		DurationS: o.duration.Seconds(), Rates: o.rates, LeadS: o.lead.Seconds(), Waiting: o.waiting,
	}
}

type result struct {
	Type     string           `json:"type"`
	Produce  *throughput      `json:"produce,omitempty"`
	Batch    *throughput      `json:"batch,omitempty"`
	Consume  *consumeResult   `json:"consume,omitempty"`
	Memory   *memoryResult    `json:"memory,omitempty"`
	Lateness []latenessResult `json:"lateness,omitempty"`
	Problems []string         `json:"problems,omitempty"`
}

// memoryResult is Redis memory per waiting message.
type memoryResult struct {
	Messages    int64   `json:"messages"`
	Bytes       int64   `json:"bytes"`
	BytesPerMsg float64 `json:"bytes_per_msg"`
}

type throughput struct {
	Messages   int64   `json:"messages"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
}

func newThroughput(n int64, d time.Duration) throughput {
	return throughput{Messages: n, Seconds: d.Seconds(), MsgsPerSec: float64(n) / d.Seconds()}
}

type consumeResult struct {
	throughput
	Handled int64 `json:"handled"`
}

type latenessResult struct {
	Waiting    int64   `json:"waiting"` // far-future messages in the topic
	Rate       int     `json:"rate"`
	DurationS  float64 `json:"duration_s"`
	LeadS      float64 `json:"lead_s"`
	Sent       int64   `json:"sent"`
	Fired      int64   `json:"fired"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	Early      int64   `json:"early"`
	MaxSendLag float64 `json:"max_send_lag_ms"`
}

func printJSON(w io.Writer, r report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func printTable(w io.Writer, r report) {
	server := "external"
	if r.Env.Throwaway {
		server = "throwaway"
	}
	fmt.Fprintf(w, "redis %s at %s (%s), %s %s, %d CPUs\n", r.Env.RedisVersion, r.Env.Redis, server, r.Env.Go, r.Env.OS, r.Env.CPUs)
	c := r.Config
	fmt.Fprintf(w, "n=%d producers=%d concurrency=%d prefetch=%d body=%dB slots=%d batch=%d×%d mem-n=%d\n\n",
		c.N, c.Producers, c.Concurrency, c.Prefetch, c.BodyBytes, c.Slots, c.BatchProducers, c.BatchSize, c.MemN)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tproduce msg/s\tbatch msg/s\tconsume+ack msg/s\tmemory B/msg\t")
	for _, res := range r.Results {
		cols := []string{res.Type, "-", "-", "-", "-"}
		if res.Produce != nil {
			cols[1] = thousands(res.Produce.MsgsPerSec)
		}
		if res.Batch != nil {
			cols[2] = thousands(res.Batch.MsgsPerSec)
		}
		if res.Consume != nil {
			cols[3] = thousands(res.Consume.MsgsPerSec)
		}
		if res.Memory != nil {
			cols[4] = fmt.Sprintf("%.0f", res.Memory.BytesPerMsg)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
	if c.DurationS > 0 {
		fmt.Fprintf(w, "\nlateness: messages coming due for %gs, each sent %gs ahead\n\n", c.DurationS, c.LeadS)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "type\twaiting\tdue msg/s\tfired\tlate p50\tlate p99\tlate max\tearly\t")
		for _, res := range r.Results {
			for _, l := range res.Lateness {
				fmt.Fprintln(tw, strings.Join([]string{res.Type, thousands(float64(l.Waiting)), thousands(float64(l.Rate)),
					fmt.Sprintf("%d/%d", l.Fired, l.Sent), fmt.Sprintf("%.1fms", l.P50), fmt.Sprintf("%.1fms", l.P99),
					fmt.Sprintf("%.1fms", l.Max), fmt.Sprint(l.Early)}, "\t")+"\t")
			}
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nproduce: single Send… calls from the producer goroutines; batch: SendBatch calls; consume+ack: one Client")
	fmt.Fprintln(w, "draining the backlog, no-op handler; memory: INFO used_memory growth per far-future message (client buffers")
	fmt.Fprintln(w, "excluded); lateness: handler call time − Message.DueAt (time-based types only); early must be 0.")
}

// thousands formats a rate as an integer with thousands separators.
func thousands(f float64) string {
	s := fmt.Sprintf("%d", int64(f+0.5))
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}
