package service

import (
	"io"
	"net/http"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

type SizeBody struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Size      int64  `json:"size"`
}

// ackJob is DELETE …/job/{id}: 204 always, unknown ids too.
func (s *Service) ackJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if found {
		if err := qr.pool.ack(r.Context(), t, qr.id); err != nil {
			s.libError(w, r, err)
			return
		}
	}
	s.metrics.Acked.Add(1)
	respond.WriteNoContent(w)
}

// maxCauseSize bounds the error text a nack may carry.
const MaxCauseSize = 64 << 10

// nackJob is rmqd's addition POST …/job/{id}/nack?delay_ms=N (or delay=N
// seconds): the delivery failed; it comes back after the delay (0: the
// library's backoff), or goes to the dead letter when it has no try left. The body, if any, is kept as
// the job's last error. 204, or 404 when no delivery of the job is in flight.
func (s *Service) nackJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	q := r.URL.Query()
	delay, ok := params.QueryUint(q, "delay", 0, params.MaxUint32)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid delay")
		return
	}
	retryAfter := time.Duration(delay) * time.Second
	if q.Has("delay_ms") {
		ms, ok := params.QueryUint(q, "delay_ms", 0, params.MaxUint32*1000)
		if !ok || q.Has("delay") {
			respond.WriteError(w, http.StatusBadRequest, "invalid delay")
			return
		}
		retryAfter = time.Duration(ms) * time.Millisecond
	}
	cause, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCauseSize))
	if err != nil {
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if found {
		found, err = qr.pool.nack(r.Context(), t, qr.id, retryAfter, string(cause))
		if err != nil {
			s.libError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	respond.WriteNoContent(w)
}

// peekQueue shows the next ready job without taking it.
func (s *Service) peekQueue(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var j job
	now := time.Now()
	if found {
		j, found, err = qr.pool.head(r.Context(), t, now)
		if err != nil {
			s.libError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "the queue is empty")
		return
	}
	respond.WriteJSON(w, http.StatusOK, j.answer(qr.ns, qr.q, "", now))
}

// peekJob shows a job in any state while its data exists.
func (s *Service) peekJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var j job
	now := time.Now()
	if found {
		j, found, err = qr.pool.lookupJob(r.Context(), t, qr.id, now)
		if err != nil {
			s.libError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	j.remainTries = 0 // lmstfy does not track tries by id
	respond.WriteJSON(w, http.StatusOK, j.answer(qr.ns, qr.q, "", now))
}

// size counts ready jobs; no token needed.
func (s *Service) size(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var n int64
	if found {
		if n, err = qr.pool.readySize(r.Context(), t); err != nil {
			s.writeInternal(w, r, err)
			return
		}
	}
	respond.WriteJSON(w, http.StatusOK, SizeBody{qr.ns, qr.q, n})
}

// destroy removes the ready jobs of a queue; 204 always.
func (s *Service) destroy(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.QueueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if found {
		if err := qr.pool.destroy(r.Context(), t); err != nil {
			s.libError(w, r, err)
			return
		}
	}
	respond.WriteNoContent(w)
}
