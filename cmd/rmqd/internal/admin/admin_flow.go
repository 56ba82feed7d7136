package admin

import (
	"net/http"
	"time"

	"github.com/rmq-go/rmq/rmq"
)

// Flow control of a queue (docs/flow-control.md), rmqd's addition beside
// lmstfy's per-token throttles: lmstfy limits how often a token may
// publish or consume (429 past it); these limit the queue's jobs
// themselves, across every rmqd and every consumer: how many may start
// per interval, how many may be in flight at once, and the same per group
// (a publish's ?group=). A job held back by them stays ready, unleased: a
// consume finds nothing (or waits, with ?timeout=) rather than getting a
// 429. The limits are stored with the queue's topic in Redis, so every
// rmqd obeys them at once.
//
//	GET    /queue/{ns}/{q}/limits   200 the limits (zeros: none)
//	PUT    /queue/{ns}/{q}/limits   200 the limits stored; 400 invalid
//	DELETE /queue/{ns}/{q}/limits   204
//
// all 404 {"error":"queue not found"} for a queue never published to.

// queueLimits is the JSON of a queue's limits: a field 0 is no limit.
type queueLimits struct {
	Rate             int   `json:"rate"`              // jobs that may start per interval_ms
	IntervalMs       int64 `json:"interval_ms"`       //
	Concurrency      int   `json:"concurrency"`       // jobs in flight at once
	GroupConcurrency int   `json:"group_concurrency"` // jobs of one group in flight at once
	GroupRate        int   `json:"group_rate"`        // jobs of one group that may start per group_interval_ms
	GroupIntervalMs  int64 `json:"group_interval_ms"` //
}

func limitsJSON(l rmq.Limits) queueLimits {
	return queueLimits{Rate: l.Rate, IntervalMs: l.RatePer.Milliseconds(), Concurrency: l.Concurrency,
		GroupConcurrency: l.GroupConcurrency, GroupRate: l.GroupRate, GroupIntervalMs: l.GroupRatePer.Milliseconds()}
}

func (q queueLimits) limits() rmq.Limits {
	return rmq.Limits{Rate: q.Rate, RatePer: time.Duration(q.IntervalMs) * time.Millisecond, Concurrency: q.Concurrency,
		GroupConcurrency: q.GroupConcurrency, GroupRate: q.GroupRate, GroupRatePer: time.Duration(q.GroupIntervalMs) * time.Millisecond}
}

// queueLimitsRoute serves the three methods of /queue/{ns}/{q}/limits.
func (s *handlers) queueLimitsRoute(w http.ResponseWriter, r *http.Request) {
	queueSetting[rmq.Limits, queueLimits]{
		what: "limits", read: (*rmq.Inspector).Limits, write: (*rmq.Inspector).SetLimits, invalid: rmq.ErrInvalidLimits,
		toJSON: limitsJSON,
		fromJSON: func(q queueLimits) (rmq.Limits, bool) {
			return q.limits(), q.Rate >= 0 && q.GroupRate >= 0 && q.IntervalMs >= 0 && q.GroupIntervalMs >= 0
		},
	}.serve(s, w, r)
}
