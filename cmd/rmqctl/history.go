package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/rmq"
)

const historyHelp = `Usage:
  rmqctl history TOPIC [--since 1h]

Shows TOPIC's history as every client of it wrote it to Redis, per minute:
messages sent, deliveries completed (acked), retried and dead, messages
expired and cancelled, deliveries forwarded to a broker, and the 99th
percentile of handler time and of firing lateness. A table shows at most
60 rows: over a longer --since each row adds up several minutes (its
percentiles are the largest of its minutes'); the bar charts COMPLETED.
-o json lists every minute. Clients keep 72 hours unless rmq.WithHistory
says otherwise; a client writes what it counted every 10 s.
`

const workersHelp = `Usage:
  rmqctl workers

Lists the running clients (workers) under the prefix: every started
rmq.Client (rmqd's included) refreshes its record every 10 s and deletes
it when it closes; a killed process leaves the list within 30 s. Shows
each one's host, process id, version, start, last refresh, topics, summed
concurrency and deliveries in flight.
`

// historyRows is the most rows a history table shows.
const historyRows = 60

type historyJSON struct {
	Minute      string  `json:"minute"`
	Sent        int64   `json:"sent"`
	Completed   int64   `json:"completed"`
	Retried     int64   `json:"retried"`
	Dead        int64   `json:"dead"`
	Expired     int64   `json:"expired"`
	Cancelled   int64   `json:"cancelled"`
	Forwarded   int64   `json:"forwarded"`
	HandlerP50  float64 `json:"handler_p50_seconds"`
	HandlerP99  float64 `json:"handler_p99_seconds"`
	LatenessP50 float64 `json:"lateness_p50_seconds"`
	LatenessP99 float64 `json:"lateness_p99_seconds"`
}

type workerJSON struct {
	ID          string   `json:"id"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Version     string   `json:"version"`
	Started     string   `json:"started"`
	Seen        string   `json:"seen"`
	Topics      []string `json:"topics"`
	Concurrency int      `json:"concurrency"`
	InFlight    int      `json:"in_flight"`
}

// history shows a topic's per-minute history.
func (a *app) history(args []string) error {
	c := find("history")
	fs := c.flags()
	since := fs.Duration("since", time.Hour, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	if *since <= 0 {
		return usagef(c.name, "history: --since must be positive")
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	ps, err := a.insp.History(ctx, t, time.Now().Add(-*since))
	if err != nil {
		return err
	}
	if a.output == "json" {
		out := make([]historyJSON, len(ps))
		for i, p := range ps {
			out[i] = historyJSON{Minute: fmtTime(p.Minute), Sent: p.Sent, Completed: p.Completed, Retried: p.Retried,
				Dead: p.Dead, Expired: p.Expired, Cancelled: p.Cancelled, Forwarded: p.Forwarded,
				HandlerP50: p.HandlerP50.Seconds(), HandlerP99: p.HandlerP99.Seconds(),
				LatenessP50: p.LatenessP50.Seconds(), LatenessP99: p.LatenessP99.Seconds()}
		}
		return writeJSON(a.stdout, out)
	}
	rows := foldHistory(ps, historyRows)
	var most int64
	for _, r := range rows {
		most = max(most, r.Completed)
	}
	tb := newTable(a.stdout, "MINUTE", "SENT", "COMPLETED", "RETRIED", "DEAD", "EXPIRED", "CANCELLED", "FORWARDED", "HANDLER-P99", "LATE-P99", "")
	for _, r := range rows {
		tb.row(r.Minute.UTC().Format("2006-01-02 15:04"), itoa(r.Sent), itoa(r.Completed), itoa(r.Retried), itoa(r.Dead),
			itoa(r.Expired), itoa(r.Cancelled), itoa(r.Forwarded), cellDuration(r.HandlerP99), cellDuration(r.LatenessP99), bar(r.Completed, most, 20))
	}
	return tb.flush()
}

// foldHistory adds up consecutive minutes so that at most n rows remain;
// a row's percentiles are the largest of its minutes'.
func foldHistory(ps []rmq.MetricPoint, n int) []rmq.MetricPoint {
	per := (len(ps) + n - 1) / n
	if per <= 1 {
		return ps
	}
	var out []rmq.MetricPoint
	for i := 0; i < len(ps); i += per {
		r := ps[i]
		for _, p := range ps[i+1 : min(i+per, len(ps))] {
			r.Sent += p.Sent
			r.Completed += p.Completed
			r.Retried += p.Retried
			r.Dead += p.Dead
			r.Expired += p.Expired
			r.Cancelled += p.Cancelled
			r.Forwarded += p.Forwarded
			r.HandlerP50, r.HandlerP99 = max(r.HandlerP50, p.HandlerP50), max(r.HandlerP99, p.HandlerP99)
			r.LatenessP50, r.LatenessP99 = max(r.LatenessP50, p.LatenessP50), max(r.LatenessP99, p.LatenessP99)
		}
		out = append(out, r)
	}
	return out
}

// bar is n of most as up to width blocks.
func bar(n, most int64, width int) string {
	if n <= 0 || most <= 0 {
		return ""
	}
	return strings.Repeat("█", max(1, int(n*int64(width)/most)))
}

// cellDuration is a duration rounded for a table; "-" for none.
func cellDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// workers lists the running clients.
func (a *app) workers(args []string) error {
	c := find("workers")
	if _, err := a.parseArgs(c, c.flags(), args); err != nil {
		return err
	}
	ctx, cancel := a.context()
	defer cancel()
	if err := a.connect(ctx); err != nil {
		return err
	}
	ws, err := a.insp.Workers(ctx)
	if err != nil {
		return err
	}
	out := make([]workerJSON, len(ws))
	for i, w := range ws {
		out[i] = workerJSON{ID: w.ID, Host: w.Host, PID: w.PID, Version: w.Version, Started: fmtTime(w.Started),
			Seen: fmtTime(w.Seen), Topics: append([]string{}, w.Topics...), Concurrency: w.Concurrency, InFlight: w.InFlight}
	}
	if a.output == "json" {
		return writeJSON(a.stdout, out)
	}
	tb := newTable(a.stdout, "ID", "HOST", "PID", "VERSION", "STARTED", "SEEN", "CONCURRENCY", "IN-FLIGHT", "TOPICS")
	for _, w := range out {
		tb.row(w.ID, w.Host, strconv.Itoa(w.PID), w.Version, w.Started, w.Seen, strconv.Itoa(w.Concurrency),
			strconv.Itoa(w.InFlight), strings.Join(w.Topics, ","))
	}
	return tb.flush()
}
