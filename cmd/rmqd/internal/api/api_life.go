package api

// api_life.go: a job's life after hand-off (an RMQ extension): its state
// and result by id, waiting for its end, its progress, cancelling it, and
// a queue's events as a Server-Sent Events stream. docs/rmqd.md documents
// the routes.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// lifeRoutes adds the routes of a job's life to the API router.
func (s *handlers) lifeRoutes(q func(pattern string, o service.RouteOpts, h service.QueueHandler)) {
	q("GET /api/{ns}/{q}/events", service.RouteOpts{Stream: true, Throttle: service.ThrottleRead}, s.events)
	q("GET /api/{ns}/{q}/job/{id}/wait", service.RouteOpts{LongPoll: true, Throttle: service.ThrottleRead}, s.waitJob)
	q("PUT /api/{ns}/{q}/job/{id}/progress", service.RouteOpts{Throttle: service.ThrottleWrite}, s.progressJob)
	q("POST /api/{ns}/{q}/job/{id}/cancel", service.RouteOpts{Throttle: service.ThrottleWrite}, s.cancelJob)
}

// LifeJob is a job as GET …/job/{id} and …/wait answer it: lmstfy's fields,
// then what rmqd knows of its life. result and progress are standard
// base64, as data is; finished_at is RFC 3339 (UTC, up to ns).
type LifeJob struct {
	encode.JobBody
	State      string `json:"state"`    // waiting, delayed, in_flight, dead, completed, cancelled
	Attempts   int    `json:"attempts"` // failed deliveries so far
	LastError  string `json:"last_error,omitempty"`
	Result     []byte `json:"result,omitempty"`      // completed: what its consumer set
	Progress   []byte `json:"progress,omitempty"`    // in flight: the latest progress
	FinishedAt string `json:"finished_at,omitempty"` // completed, cancelled, dead
}

func lifeJob(ns, q string, j pull.Job, m rmq.MessageInfo, now time.Time) LifeJob {
	if m.State != rmq.StateInFlight {
		m.Progress = nil // only a delivery in flight has progress
	}
	out := LifeJob{JobBody: j.Answer(ns, q, "", now), State: string(m.State), Attempts: m.Attempts,
		LastError: m.LastError, Result: m.Result, Progress: m.Progress}
	out.RemainTries = 0 // lmstfy does not track tries by id
	at := m.FinishedAt
	if m.State == rmq.StateDead {
		at = m.DiedAt
	}
	if !at.IsZero() {
		out.FinishedAt = at.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// peekJob shows a job in any state while its data exists, and a finished
// one while its queue retains it (rmq.Lifecycle), with its life.
func (s *handlers) peekJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var (
		j pull.Job
		m rmq.MessageInfo
	)
	now := time.Now()
	if found {
		j, m, found, err = qr.Pool.LookupInfo(r.Context(), t, qr.ID, now)
		if err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	respond.WriteJSON(w, http.StatusOK, lifeJob(qr.Ns, qr.Q, j, m, now))
}

// waitJob is GET …/job/{id}/wait?timeout=N: the job's state once it
// finished (completed, dead, cancelled), or after N seconds (at most
// --max-wait; 0: at once) its state then. 404 for a job not found.
func (s *handlers) waitJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	timeout, ok := params.QueryUint(r.URL.Query(), "timeout", 0, params.MaxUint32)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid timeout")
		return
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	wait := min(time.Duration(timeout)*time.Second, s.Cfg.MaxWait)
	if wait > 0 {
		// The wait ends at its timeout, when the client goes away, when
		// its token is deleted or when shutdown begins.
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		stop := context.AfterFunc(s.Stopping, cancel)
		defer stop()
		m, err := qr.Pool.Client.Wait(ctx, t, qr.ID)
		switch {
		case err == nil || errors.Is(err, rmq.ErrDead) || errors.Is(err, rmq.ErrCancelled):
			respond.WriteJSON(w, http.StatusOK, lifeJob(qr.Ns, qr.Q, pull.InfoJob(t, m), m, time.Now()))
			return
		case errors.Is(err, rmq.ErrMessageNotFound):
			respond.WriteError(w, http.StatusNotFound, "job not found")
			return
		case r.Context().Err() != nil:
			return // the client left (or its token went): nobody reads an answer
		case ctx.Err() == nil:
			s.LibError(w, r, err)
			return
		}
		// Timed out, or shutdown: the state now, as without a timeout.
	}
	s.peekJob(w, r, qr)
}

// MaxProgressSize bounds a progress report.
const MaxProgressSize = 64 << 10

// progressJob is PUT …/job/{id}/progress: the body becomes the progress
// of the job's delivery in flight (GET …/job/{id} shows it, the queue's
// event log records it). 404 when no delivery of the job is in flight,
// 409 when the delivery ended while this was written.
func (s *handlers) progressJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxProgressSize))
	if err != nil {
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	if len(body) == 0 {
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	res := pull.ProgressNotInFlight
	if found {
		if res, err = qr.Pool.Progress(r.Context(), t, qr.ID, body); err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	switch res {
	case pull.ProgressNotInFlight:
		respond.WriteError(w, http.StatusNotFound, "job not in flight")
	case pull.ProgressStale:
		respond.WriteError(w, http.StatusConflict, "delivery no longer current")
	default:
		respond.WriteJSON(w, http.StatusOK, respond.MsgBody{Msg: "progress stored"})
	}
}

// cancelJob is POST …/job/{id}/cancel (rmq.Inspector.Cancel): the job is
// removed wherever it waits or runs, its waiters are told, and a
// retaining queue keeps it as cancelled. 404 for a job that neither waits
// nor runs (unknown, finished, dead).
func (s *handlers) cancelJob(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		if found, err = qr.Pool.Insp.Cancel(r.Context(), t, qr.ID); err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Msg   string `json:"msg"`
		JobID string `json:"job_id"`
	}{"cancelled", qr.ID})
}
