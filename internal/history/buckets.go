// Package history keeps the per-topic, per-minute counts every client
// writes to Redis (sent, completed, retried, dead, expired, cancelled,
// forwarded; handler time and firing lateness as histograms) and the
// heartbeat records of the started clients. A client adds up in memory
// and writes what it counted at most once per flush interval, in one
// pipelined round trip, so the cost in Redis grows with topics and
// minutes, not with messages. rmq's Inspector reads both back.
package history

import (
	"strconv"
	"time"
)

// Edges are the upper edges of the duration histograms (handler time and
// firing lateness); a last bucket holds the rest. The dashboard draws its
// firing-lateness chart with the same buckets.
var Edges = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
}

// Buckets is the number of buckets of a histogram.
const Buckets = len(Edges) + 1

// Hist is a histogram: counts per bucket of Edges.
type Hist [Buckets]int64

// Bucket returns the bucket of d: the first whose upper edge is at least
// d (a negative d, early, is in the first).
func Bucket(d time.Duration) int {
	for j, e := range Edges {
		if d <= e {
			return j
		}
	}
	return len(Edges)
}

// Quantile estimates the q-quantile (0 < q <= 1) of h, interpolating
// linearly inside the bucket it falls in, as Prometheus's
// histogram_quantile does: the first bucket starts at 0, and a quantile in
// the last (open) bucket is its lower edge, the largest value the buckets
// can tell. An empty h gives 0.
func Quantile(h Hist, q float64) time.Duration {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var below int64
	for j, n := range h {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		if j == len(Edges) {
			return Edges[len(Edges)-1]
		}
		lo := time.Duration(0)
		if j > 0 {
			lo = Edges[j-1]
		}
		frac := (rank - float64(below)) / float64(n)
		return lo + time.Duration(frac*float64(Edges[j]-lo))
	}
	return Edges[len(Edges)-1]
}

// Counter names one count of a topic-minute.
type Counter int

// The counts of a topic-minute, in the order of their hash fields.
const (
	Sent Counter = iota
	Completed
	Retried
	Dead
	Expired
	Cancelled
	Forwarded
	nCounters
)

// counterFields are the hash fields of the counts, one per Counter.
var counterFields = [nCounters]string{"sent", "completed", "retried", "dead", "expired", "cancelled", "forwarded"}

// handlerFields and lateFields are the hash fields of the histograms'
// buckets: "h0".."h9" and "l0".."l9".
var handlerFields, lateFields = histFields("h"), histFields("l")

func histFields(p string) (f [Buckets]string) {
	for j := range f {
		f[j] = p + strconv.Itoa(j)
	}
	return f
}

// Minute is the counts of one topic in one minute.
type Minute struct {
	Counts   [nCounters]int64
	Handler  Hist // handler time
	Lateness Hist // firing lateness
}

// Count returns the count c.
func (m *Minute) Count(c Counter) int64 { return m.Counts[c] }

func (m *Minute) add(o *Minute) {
	for j := range m.Counts {
		m.Counts[j] += o.Counts[j]
	}
	for j := range m.Handler {
		m.Handler[j] += o.Handler[j]
		m.Lateness[j] += o.Lateness[j]
	}
}

// Key returns the hash of topic's counts of the minute starting at
// minute (a multiple of 60 s since the Unix epoch), under prefix. It
// carries the topic's hash tag, as the topic's other whole-topic keys do.
func Key(prefix, topic string, minute time.Time) string {
	return prefix + ":{" + topic + "}:hist:" + strconv.FormatInt(minute.Unix(), 10)
}

// Fields returns the hash fields of a topic-minute, counts first.
func Fields() []string {
	out := append([]string(nil), counterFields[:]...)
	out = append(out, handlerFields[:]...)
	return append(out, lateFields[:]...)
}
