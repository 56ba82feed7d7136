package service

import (
	"errors"
	"net/http"
	"slices"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// apiHandler serves lmstfy's queue API (LMSTFY-API.md §4–6).
func (s *Service) ApiHandler() http.Handler {
	rt := &apiRouter{}
	q := func(pattern string, o routeOpts, h queueHandler) { rt.handle(pattern, s.queueRoute(o, h)) }
	q("PUT /api/{ns}/{q}", routeOpts{throttle: throttleWrite}, s.publish)
	q("PUT /api/{ns}/{q}/bulk", routeOpts{throttle: throttleWrite}, s.publishBulk)
	q("PUT /api/{ns}/{q}/job/{id}", routeOpts{throttle: throttleWrite}, s.republish) // a publish too
	q("GET /api/{ns}/{q}", routeOpts{consume: true, throttle: throttleRead}, s.refuseForwarded(s.consume))
	q("DELETE /api/{ns}/{q}/job/{id}", routeOpts{}, s.ackJob)
	q("POST /api/{ns}/{q}/job/{id}/nack", routeOpts{}, s.nackJob)
	q("GET /api/{ns}/{q}/peek", routeOpts{}, s.peekQueue)
	q("GET /api/{ns}/{q}/job/{id}", routeOpts{}, s.peekJob)
	q("GET /api/{ns}/{q}/size", routeOpts{public: true}, s.size)
	q("DELETE /api/{ns}/{q}", routeOpts{}, s.destroy)
	q("GET /api/{ns}/{q}/deadletter", routeOpts{}, s.deadPeek)
	q("GET /api/{ns}/{q}/deadletter/size", routeOpts{public: true}, s.deadSize)
	q("PUT /api/{ns}/{q}/deadletter", routeOpts{}, s.respawn)
	q("DELETE /api/{ns}/{q}/deadletter", routeOpts{}, s.deadDelete)
	s.scheduleRoutes(q) // api_schedules.go
	return s.serveAPI(rt, func(w http.ResponseWriter, r *http.Request) {
		respond.WriteError(w, http.StatusNotFound, "api not found")
	})
}

// errForwarded is the 409 text of a consume from a forwarded queue.
const ErrForwarded = "queue is forwarded to a broker: consume it there"

// refuseForwarded wraps the consume route: a consume that names a queue
// this process forwards is refused (409), since a job it took would not
// reach the broker. Without forwards the route is served as it is.
func (s *Service) refuseForwarded(h queueHandler) queueHandler {
	forwarded := false
	for _, p := range s.Pools {
		forwarded = forwarded || len(p.forwards) > 0
	}
	if !forwarded {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, qr *queueReq) {
		if len(qr.pool.forwards) > 0 && slices.ContainsFunc(names.ConsumeQueues(qr.q), func(q string) bool {
			return qr.pool.ForwardOf(qr.ns, q) != nil
		}) {
			respond.WriteError(w, http.StatusConflict, ErrForwarded)
			return
		}
		h(w, r, qr)
	}
}

// queueAllowed is reserveQueue with its answer: false means answered.
func (s *Service) queueAllowed(w http.ResponseWriter, r *http.Request, qr *queueReq) bool {
	err := qr.pool.reserveQueue(r.Context(), qr.ns, qr.q, qr.token, s.cfg.Quotas.MaxQueuesPerToken)
	switch {
	case errors.Is(err, errTooManyQueues):
		writeQuota(w, "too many queues created by this token", s.cfg.Quotas.MaxQueuesPerToken, "max-queues-per-token")
		return false
	case err != nil:
		s.writeInternal(w, r, err)
		return false
	}
	return true
}
