package admin

import (
	"net/http"

	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
)

// Queue administration, rmqd's addition on the admin port (behind basic
// auth when accounts are configured): a queue's counts, and pausing its
// deliveries. ?pool= names the pool (default: default).

// adminQueueTopic resolves the pool and the queue's topic; ok false means
// the answer was written. found is false for a queue never published to.
func (s *handlers) adminQueueTopic(w http.ResponseWriter, r *http.Request) (p *pull.Pool, t topic.Topic, found, ok bool) {
	ns, q := r.PathValue("ns"), r.PathValue("q")
	if msg := names.NameErr(ns, q); msg != "" {
		respond.WriteError(w, http.StatusBadRequest, msg)
		return nil, t, false, false
	}
	name, ok := s.adminPool(w, r.URL.Query().Get("pool"))
	if !ok {
		return nil, t, false, false
	}
	p = s.Pools[name]
	t, found, err := p.QueueTopic(r.Context(), ns, q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return nil, t, false, false
	}
	return p, t, found, true
}

// adminQueue is adminQueueTopic with the queue's counts.
func (s *handlers) adminQueue(w http.ResponseWriter, r *http.Request) (p *pull.Pool, qs pull.QueueStats, found, ok bool) {
	p, t, found, ok := s.adminQueueTopic(w, r)
	if !ok {
		return nil, qs, false, false
	}
	if found {
		var err error
		if qs, err = p.Stats(r.Context(), t); err != nil {
			s.WriteInternal(w, r, err)
			return nil, qs, false, false
		}
	}
	qs.Namespace, qs.Queue = r.PathValue("ns"), r.PathValue("q")
	return p, qs, found, true
}

// queueInfo is GET /queue/{ns}/{q}: counts by state, type, paused; 404
// {"error":"queue not found"} for a queue never published to.
func (s *handlers) queueInfo(w http.ResponseWriter, r *http.Request) {
	_, qs, found, ok := s.adminQueue(w, r)
	if !ok {
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "queue not found")
		return
	}
	respond.WriteJSON(w, http.StatusOK, qs)
}

// pauseQueue is POST /queue/{ns}/{q}/pause: consumes get nothing from it
// until resumed (publishes, acks and the dead letter work as usual);
// resumeQueue is POST /queue/{ns}/{q}/resume. Both 204.
func (s *handlers) pauseQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, true) }

func (s *handlers) resumeQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

func (s *handlers) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	p, _, found, ok := s.adminQueue(w, r)
	if !ok {
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "queue not found")
		return
	}
	t, _, err := p.QueueTopic(r.Context(), r.PathValue("ns"), r.PathValue("q"))
	if err == nil {
		if paused {
			err = p.Pause(r.Context(), t)
		} else {
			err = p.Resume(r.Context(), t)
		}
	}
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	respond.WriteNoContent(w)
}
