package main

import (
	"io"
	"net/http"
	"time"
)

type sizeBody struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Size      int64  `json:"size"`
}

// ackJob is DELETE …/job/{id}: 204 always, unknown ids too.
func (s *service) ackJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
	s.metrics.acked.Add(1)
	writeNoContent(w)
}

// maxCauseSize bounds the error text a nack may carry.
const maxCauseSize = 64 << 10

// nackJob is rmqd's addition POST …/job/{id}/nack?delay_ms=N (or delay=N
// seconds): the delivery failed; it comes back after the delay (0: the
// library's backoff), or goes to the dead letter when it has no try left. The body, if any, is kept as
// the job's last error. 204, or 404 when no delivery of the job is in flight.
func (s *service) nackJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	q := r.URL.Query()
	delay, ok := queryUint(q, "delay", 0, maxUint32)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid delay")
		return
	}
	retryAfter := time.Duration(delay) * time.Second
	if q.Has("delay_ms") {
		ms, ok := queryUint(q, "delay_ms", 0, maxUint32*1000)
		if !ok || q.Has("delay") {
			writeError(w, http.StatusBadRequest, "invalid delay")
			return
		}
		retryAfter = time.Duration(ms) * time.Millisecond
	}
	cause, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCauseSize))
	if err != nil {
		if isTooLarge(err) {
			writeError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid body")
		return
	}
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
		writeError(w, http.StatusNotFound, "job not found")
		return
	}
	writeNoContent(w)
}

// peekQueue shows the next ready job without taking it.
func (s *service) peekQueue(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
		writeError(w, http.StatusNotFound, "the queue is empty")
		return
	}
	writeJSON(w, http.StatusOK, j.answer(qr.ns, qr.q, "", now))
}

// peekJob shows a job in any state while its data exists.
func (s *service) peekJob(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
		writeError(w, http.StatusNotFound, "job not found")
		return
	}
	j.remainTries = 0 // lmstfy does not track tries by id
	writeJSON(w, http.StatusOK, j.answer(qr.ns, qr.q, "", now))
}

// size counts ready jobs; no token needed.
func (s *service) size(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
	writeJSON(w, http.StatusOK, sizeBody{qr.ns, qr.q, n})
}

// destroy removes the ready jobs of a queue; 204 always.
func (s *service) destroy(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
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
	writeNoContent(w)
}
