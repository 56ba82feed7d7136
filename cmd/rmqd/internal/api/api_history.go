package api

// api_history.go: a queue's per-minute history (an RMQ extension), as
// every client of it wrote it to Redis. docs/rmqd.md documents the route.

import (
	"net/http"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// maxHistorySince bounds ?since=: the clients keep 72 h by default.
const maxHistorySince = 31 * 24 * time.Hour

// HistoryPoint is one minute of GET …/history: counts of that minute and
// percentiles in seconds.
type HistoryPoint struct {
	Minute      string  `json:"minute"` // RFC 3339, UTC
	Sent        int64   `json:"sent"`
	Completed   int64   `json:"completed"`
	Retried     int64   `json:"retried"`
	Dead        int64   `json:"dead"`
	Expired     int64   `json:"expired"`
	Cancelled   int64   `json:"cancelled"`
	Forwarded   int64   `json:"forwarded"`
	HandlerP50  float64 `json:"handler_p50"`
	HandlerP99  float64 `json:"handler_p99"`
	LatenessP50 float64 `json:"lateness_p50"`
	LatenessP99 float64 `json:"lateness_p99"`
}

// HistoryBody is GET /api/{ns}/{q}/history's answer.
type HistoryBody struct {
	Namespace string         `json:"namespace"`
	Queue     string         `json:"queue"`
	Since     string         `json:"since"`
	Points    []HistoryPoint `json:"points"`
}

// history is GET /api/{ns}/{q}/history[?since=1h]: a point per minute
// from since (a Go duration before now, default 1h, at most 31 days) to
// the current minute, oldest first; a queue never published has none.
func (s *handlers) history(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	since := time.Hour
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxHistorySince {
			respond.WriteError(w, http.StatusBadRequest, "invalid since")
			return
		}
		since = d
	}
	from := time.Now().Add(-since)
	out := HistoryBody{Namespace: qr.Ns, Queue: qr.Q, Since: from.UTC().Format(time.RFC3339), Points: []HistoryPoint{}}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		ps, err := qr.Pool.Insp.History(r.Context(), t, from)
		if err != nil {
			s.LibError(w, r, err)
			return
		}
		for _, p := range ps {
			out.Points = append(out.Points, HistoryPoint{Minute: p.Minute.UTC().Format(time.RFC3339), Sent: p.Sent,
				Completed: p.Completed, Retried: p.Retried, Dead: p.Dead, Expired: p.Expired, Cancelled: p.Cancelled,
				Forwarded: p.Forwarded, HandlerP50: p.HandlerP50.Seconds(), HandlerP99: p.HandlerP99.Seconds(),
				LatenessP50: p.LatenessP50.Seconds(), LatenessP99: p.LatenessP99.Seconds()})
		}
	}
	respond.WriteJSON(w, http.StatusOK, out)
}
