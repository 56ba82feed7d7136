package metrics

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

// Metrics are rmqd's own counters, served on /metrics in the Prometheus
// text format. They are written by hand so the main module does not need
// the Prometheus client (it lives in an x/ module of its own); the format
// is simple and a test parses it back. A request is counted without a
// lock: its route's series are found in a sync.Map and are atomics.
type Metrics struct {
	routes sync.Map // routeKey -> *routeStats

	Published, Consumed, Acked atomic.Uint64
	ThrottledRead              atomic.Uint64
	ThrottledWrite             atomic.Uint64
}

type routeKey struct{ listener, route string }

// routeStats are one route's series: answers by status code and the
// latency histogram.
type routeStats struct {
	codes  [600]atomic.Uint64                 // by status code (100..599)
	counts [len(latencyBuckets)]atomic.Uint64 // per bucket, not cumulative
	sumNs  atomic.Uint64
	n      atomic.Uint64
}

// latencyBuckets are upper bounds in seconds; long polls land in the last.
var latencyBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}

func New() *Metrics { return &Metrics{} }

func (m *Metrics) ObserveRequest(listener, route string, code int, d time.Duration) {
	rk := routeKey{listener, route}
	v, ok := m.routes.Load(rk)
	if !ok {
		v, _ = m.routes.LoadOrStore(rk, &routeStats{})
	}
	st := v.(*routeStats)
	if code >= 100 && code < len(st.codes) {
		st.codes[code].Add(1)
	}
	s := d.Seconds()
	if i, _ := slices.BinarySearch(latencyBuckets[:], s); i < len(latencyBuckets) {
		st.counts[i].Add(1)
	}
	st.sumNs.Add(uint64(max(d, 0)))
	st.n.Add(1)
}

// Write renders every family, series sorted so scrapes are stable.
func (m *Metrics) Write(w io.Writer) error {
	var b strings.Builder
	type route struct {
		routeKey
		st *routeStats
	}
	var routes []route
	m.routes.Range(func(k, v any) bool {
		routes = append(routes, route{k.(routeKey), v.(*routeStats)})
		return true
	})
	slices.SortFunc(routes, func(a, b route) int { return strings.Compare(a.listener+" "+a.route, b.listener+" "+b.route) })
	b.WriteString("# HELP rmqd_http_requests_total HTTP requests answered, by listener, route pattern and status code.\n")
	b.WriteString("# TYPE rmqd_http_requests_total counter\n")
	for _, r := range routes {
		for code := range r.st.codes {
			if n := r.st.codes[code].Load(); n > 0 {
				fmt.Fprintf(&b, "rmqd_http_requests_total{listener=%s,route=%s,code=\"%d\"} %d\n",
					quoteLabel(r.listener), quoteLabel(r.route), code, n)
			}
		}
	}
	b.WriteString("# HELP rmqd_http_request_duration_seconds Time to answer an HTTP request (long polls included).\n")
	b.WriteString("# TYPE rmqd_http_request_duration_seconds histogram\n")
	for _, r := range routes {
		// n first: the buckets a concurrent request adds after it are
		// within +Inf's count at the next scrape, never above it now.
		n := r.st.n.Load()
		labels := "listener=" + quoteLabel(r.listener) + ",route=" + quoteLabel(r.route)
		var cum uint64
		for i, le := range latencyBuckets {
			cum += r.st.counts[i].Load()
			fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_bucket{%s,le=\"%s\"} %d\n", labels, strconv.FormatFloat(le, 'g', -1, 64), min(cum, n))
		}
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %d\n", labels, n)
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_sum{%s} %s\n", labels, strconv.FormatFloat(time.Duration(r.st.sumNs.Load()).Seconds(), 'g', -1, 64))
		fmt.Fprintf(&b, "rmqd_http_request_duration_seconds_count{%s} %d\n", labels, n)
	}

	counter := func(name, help string, v uint64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("rmqd_jobs_published_total", "Jobs published (bulk counts each job).", m.Published.Load())
	counter("rmqd_jobs_consumed_total", "Jobs handed out by consume.", m.Consumed.Load())
	counter("rmqd_jobs_acked_total", "DELETE job requests answered.", m.Acked.Load())
	b.WriteString("# HELP rmqd_throttled_total Requests refused with 429, by side.\n# TYPE rmqd_throttled_total counter\n")
	fmt.Fprintf(&b, "rmqd_throttled_total{side=\"read\"} %d\nrmqd_throttled_total{side=\"write\"} %d\n",
		m.ThrottledRead.Load(), m.ThrottledWrite.Load())
	_, err := io.WriteString(w, b.String())
	return err
}

// quoteLabel quotes a label value as the text format wants: backslash,
// double quote and newline escaped.
func quoteLabel(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
