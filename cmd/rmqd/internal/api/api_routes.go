package api

import (
	"errors"
	"net/http"
	"slices"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/quota"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// handler serves lmstfy's queue API (LMSTFY-API.md §4–6).
func (s *handlers) handler() http.Handler {
	rt := &service.APIRouter{}
	q := func(pattern string, o service.RouteOpts, h service.QueueHandler) {
		rt.Handle(pattern, s.QueueRoute(o, h))
	}
	q("PUT /api/{ns}/{q}", service.RouteOpts{Throttle: service.ThrottleWrite}, s.publish)
	q("PUT /api/{ns}/{q}/bulk", service.RouteOpts{Throttle: service.ThrottleWrite}, s.publishBulk)
	q("PUT /api/{ns}/{q}/job/{id}", service.RouteOpts{Throttle: service.ThrottleWrite}, s.republish) // a publish too
	q("GET /api/{ns}/{q}", service.RouteOpts{Consume: true, Throttle: service.ThrottleRead}, s.refuseForwarded(s.consume))
	q("DELETE /api/{ns}/{q}/job/{id}", service.RouteOpts{}, s.ackJob)
	q("POST /api/{ns}/{q}/job/{id}/nack", service.RouteOpts{}, s.nackJob)
	q("GET /api/{ns}/{q}/peek", service.RouteOpts{}, s.peekQueue)
	q("GET /api/{ns}/{q}/job/{id}", service.RouteOpts{}, s.peekJob)
	q("GET /api/{ns}/{q}/size", service.RouteOpts{Public: true}, s.size)
	q("DELETE /api/{ns}/{q}", service.RouteOpts{}, s.destroy)
	q("GET /api/{ns}/{q}/deadletter", service.RouteOpts{}, s.deadPeek)
	q("GET /api/{ns}/{q}/history", service.RouteOpts{Throttle: service.ThrottleRead}, s.history) // api_history.go
	q("GET /api/{ns}/{q}/deadletter/size", service.RouteOpts{Public: true}, s.deadSize)
	q("PUT /api/{ns}/{q}/deadletter", service.RouteOpts{}, s.respawn)
	q("DELETE /api/{ns}/{q}/deadletter", service.RouteOpts{}, s.deadDelete)
	s.scheduleRoutes(q) // api_schedules.go
	s.lifeRoutes(q)     // api_life.go
	s.flowRoutes(q)     // api_flows.go
	return s.ServeAPI(rt, func(w http.ResponseWriter, r *http.Request) {
		respond.WriteError(w, http.StatusNotFound, "api not found")
	})
}

// ErrForwarded is the 409 text of a consume from a forwarded queue.
const ErrForwarded = "queue is forwarded to a broker: consume it there"

// refuseForwarded wraps the consume route: a consume that names a queue
// this process forwards is refused (409), since a job it took would not
// reach the broker. Without forwards the route is served as it is.
func (s *handlers) refuseForwarded(h service.QueueHandler) service.QueueHandler {
	forwarded := false
	for _, p := range s.Pools {
		forwarded = forwarded || len(p.Forwards) > 0
	}
	if !forwarded {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
		if len(qr.Pool.Forwards) > 0 && slices.ContainsFunc(names.ConsumeQueues(qr.Q), func(q string) bool {
			return qr.Pool.ForwardOf(qr.Ns, q) != nil
		}) {
			respond.WriteError(w, http.StatusConflict, ErrForwarded)
			return
		}
		h(w, r, qr)
	}
}

// queueAllowed is reserveQueue with its answer: false means answered.
func (s *handlers) queueAllowed(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) bool {
	err := qr.Pool.ReserveQueue(r.Context(), qr.Ns, qr.Q, qr.Token, s.Cfg.Quotas.MaxQueuesPerToken)
	switch {
	case errors.Is(err, pull.ErrTooManyQueues):
		quota.WriteQuota(w, "too many queues created by this token", s.Cfg.Quotas.MaxQueuesPerToken, "max-queues-per-token")
		return false
	case err != nil:
		s.WriteInternal(w, r, err)
		return false
	}
	return true
}
