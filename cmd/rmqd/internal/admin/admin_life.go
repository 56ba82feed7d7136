package admin

import (
	"net/http"
	"time"

	"github.com/rmq-go/rmq/rmq"
)

// queueLifecycle is a queue's rmq.Lifecycle as GET/PUT
// /queue/{ns}/{q}/lifecycle answer and take it: how long its finished jobs
// stay readable with their result (ms; 0: not at all), and about how many
// events its log keeps (0: no log).
type queueLifecycle struct {
	RetentionMs int64 `json:"retention_ms"`
	Events      int   `json:"events"`
}

// queueLifecycleRoute reads (GET), replaces (PUT) or clears (DELETE) a
// queue's lifecycle settings, stored with the queue for every rmqd and
// every consumer (rmq.Inspector.SetLifecycle). Settings out of bounds
// answer 400 and change nothing; a queue never published to answers 404.
func (s *handlers) queueLifecycleRoute(w http.ResponseWriter, r *http.Request) {
	queueSetting[rmq.Lifecycle, queueLifecycle]{
		what: "lifecycle", read: (*rmq.Inspector).Lifecycle, write: (*rmq.Inspector).SetLifecycle, invalid: rmq.ErrInvalidLifecycle,
		toJSON: func(l rmq.Lifecycle) queueLifecycle {
			return queueLifecycle{RetentionMs: l.Retention.Milliseconds(), Events: l.Events}
		},
		fromJSON: func(q queueLifecycle) (rmq.Lifecycle, bool) {
			l := rmq.Lifecycle{Retention: time.Duration(q.RetentionMs) * time.Millisecond, Events: q.Events}
			return l, q.RetentionMs >= 0 && q.RetentionMs <= int64(365*24*time.Hour/time.Millisecond)
		},
	}.serve(s, w, r)
}
