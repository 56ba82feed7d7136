package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
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
	p, t, found, ok := s.adminQueueTopic(w, r)
	if !ok {
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "queue not found")
		return
	}
	switch r.Method {
	case http.MethodPut:
		var q queueLifecycle
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err == nil {
			err = json.Unmarshal(raw, &q)
		}
		if err != nil || q.RetentionMs < 0 || q.RetentionMs > int64(365*24*time.Hour/time.Millisecond) {
			respond.WriteError(w, http.StatusBadRequest, "invalid lifecycle")
			return
		}
		l := rmq.Lifecycle{Retention: time.Duration(q.RetentionMs) * time.Millisecond, Events: q.Events}
		if err := p.Insp.SetLifecycle(r.Context(), t, l); err != nil {
			if errors.Is(err, rmq.ErrInvalidLifecycle) {
				respond.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			s.LibError(w, r, err)
			return
		}
	case http.MethodDelete:
		if err := p.Insp.SetLifecycle(r.Context(), t, rmq.Lifecycle{}); err != nil {
			s.LibError(w, r, err)
			return
		}
		respond.WriteNoContent(w)
		return
	}
	l, err := p.Insp.Lifecycle(r.Context(), t)
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, queueLifecycle{RetentionMs: l.Retention.Milliseconds(), Events: l.Events})
}
