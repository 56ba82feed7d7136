package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are rmqd's own counters, served on /metrics in the Prometheus
// text format. They are written by hand so the main module does not need
// the Prometheus client (it lives in an x/ module of its own); the format
// is simple and a test parses it back.
type metrics struct {
	mu       sync.Mutex
	requests map[requestKey]uint64
	latency  map[routeKey]*histogram

	published, consumed, acked atomic.Uint64
	throttledRead              atomic.Uint64
	throttledWrite             atomic.Uint64
}

type routeKey struct{ listener, route string }

type requestKey struct {
	routeKey
	code int
}

// latencyBuckets are upper bounds in seconds; long polls land in the last.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newMetrics() *metrics {
	return &metrics{requests: map[requestKey]uint64{}, latency: map[routeKey]*histogram{}}
}

func (m *metrics) observeRequest(listener, route string, code int, d time.Duration) {
	rk := routeKey{listener, route}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestKey{rk, code}]++
	h := m.latency[rk]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets))}
		m.latency[rk] = h
	}
	s := d.Seconds()
	if i, _ := slices.BinarySearch(latencyBuckets, s); i < len(latencyBuckets) {
		h.counts[i]++
	}
	h.sum += s
	h.n++
}

// write renders every family, series sorted so scrapes are stable.
func (m *metrics) write(w io.Writer) error {
	var b strings.Builder
	m.mu.Lock()
	reqs := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		reqs = append(reqs, k)
	}
	slices.SortFunc(reqs, func(a, b requestKey) int {
		if c := strings.Compare(a.listener+" "+a.route, b.listener+" "+b.route); c != 0 {
			return c
		}
		return a.code - b.code
	})
	b.WriteString("# HELP rmqd_http_requests_total HTTP requests answered, by listener, route pattern and status code.\n")
	b.WriteString("# TYPE rmqd_http_requests_total counter\n")
	for _, k := range reqs {
		fmt.Fprintf(&b, "rmqd_http_requests_total{listener=%s,route=%s,code=\"%d\"} %d\n",
			quoteLabel(k.listener), quoteLabel(k.route), k.code, m.requests[k])
	}
	routes := make([]routeKey, 0, len(m.latency))
	for k := range m.latency {
		routes = append(routes, k)
	}
	slices.SortFunc(routes, func(a, b routeKey) int { return strings.Compare(a.listener+" "+a.route, b.listener+" "+b.route) })
	b.WriteString("# HELP rmqd_http_request_duration_seconds Time to answer an HTTP request (long polls included).\n")
	b.WriteString("# TYPE rmqd_http_request_duration_seconds histogram\n")
	for _, k := range routes {
		h := m.latency[k]
		labels := "listener=" + quoteLabel(k.listener) + ",route=" + quoteLabel(k.route)
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_bucket{%s,le=\"%s\"} %d\n", labels, strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %d\n", labels, h.n)
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_sum{%s} %s\n", labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_count{%s} %d\n", labels, h.n)
	}
	m.mu.Unlock()

	counter := func(name, help string, v uint64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("rmqd_jobs_published_total", "Jobs published (bulk counts each job).", m.published.Load())
	counter("rmqd_jobs_consumed_total", "Jobs handed out by consume.", m.consumed.Load())
	counter("rmqd_jobs_acked_total", "DELETE job requests answered.", m.acked.Load())
	b.WriteString("# HELP rmqd_throttled_total Requests refused with 429, by side.\n# TYPE rmqd_throttled_total counter\n")
	fmt.Fprintf(&b, "rmqd_throttled_total{side=\"read\"} %d\nrmqd_throttled_total{side=\"write\"} %d\n",
		m.throttledRead.Load(), m.throttledWrite.Load())
	_, err := io.WriteString(w, b.String())
	return err
}

// quoteLabel quotes a label value as the text format wants: backslash,
// double quote and newline escaped.
func quoteLabel(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
