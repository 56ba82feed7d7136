package api

import (
	"io"
	"net/http"
	"time"

	"github.com/rmq-go/rmq/consumer"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

type SizeBody struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Size      int64  `json:"size"`
}

// ackJob is DELETE …/job/{id}: 204 always, unknown ids too. A body, if
// any (lmstfy ignores one), is the result of the delivery in flight it
// acks, kept by a retaining queue (GET …/job/{id}) and given to waiters;
// one over consumer.MaxResultSize is 413 and nothing is acked.
func (s *handlers) ackJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	result, err := respond.ReadBody(w, r, consumer.MaxResultSize)
	if err != nil {
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		if err := qr.Pool.Ack(r.Context(), t, qr.ID, result); err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	s.Metrics.Acked.Add(1)
	respond.WriteNoContent(w)
}

// MaxCauseSize bounds the error text a nack may carry.
const MaxCauseSize = 64 << 10

// nackJob is rmqd's addition POST …/job/{id}/nack?delay_ms=N (or delay=N
// seconds): the delivery failed; it comes back after the delay (0: the
// library's backoff), or goes to the dead letter when it has no try left. The body, if any, is kept as
// the job's last error. 204, or 404 when no delivery of the job is in flight.
func (s *handlers) nackJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
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
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		found, err = qr.Pool.Nack(r.Context(), t, qr.ID, retryAfter, string(cause))
		if err != nil {
			s.LibError(w, r, err)
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
func (s *handlers) peekQueue(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var j pull.Job
	now := time.Now()
	if found {
		j, found, err = qr.Pool.Head(r.Context(), t, now)
		if err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "the queue is empty")
		return
	}
	respond.WriteJSON(w, http.StatusOK, j.Answer(qr.Ns, qr.Q, "", now))
}

// size counts ready jobs; no token needed.
func (s *handlers) size(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var n int64
	if found {
		if n, err = qr.Pool.ReadySize(r.Context(), t); err != nil {
			s.WriteInternal(w, r, err)
			return
		}
	}
	respond.WriteJSON(w, http.StatusOK, SizeBody{qr.Ns, qr.Q, n})
}

// destroy removes the ready jobs of a queue; 204 always.
func (s *handlers) destroy(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		if err := qr.Pool.Destroy(r.Context(), t); err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	respond.WriteNoContent(w)
}
