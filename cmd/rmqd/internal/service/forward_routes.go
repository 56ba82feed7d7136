package service

import (
	"context"
	"net/http"
	"slices"

	"github.com/rmq-go/rmq/cmd/dashboard"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// forwardStatuses lists every forward of every pool (pool "" = all), in
// the order of the pools' names and of the command line.
func (s *Service) forwardStatuses(pool string) []forward.ForwardStatus {
	out := []forward.ForwardStatus{}
	for _, name := range s.PoolNames {
		if pool != "" && name != pool {
			continue
		}
		for _, f := range s.Pools[name].forwards {
			out = append(out, f.Status())
		}
	}
	return out
}

// dashboardForwards are the default pool's forwards for the dashboard,
// whose pages show that pool.
func (s *Service) dashboardForwards(context.Context) []dashboard.Forward {
	var out []dashboard.Forward
	for _, f := range s.Pools[names.DefaultPool].forwards {
		st := f.Status()
		d := dashboard.Forward{Topic: f.Topic.Name(), Target: st.Target, Forwarded: st.Forwarded, Failed: st.Failed, LastError: st.LastError}
		if st.LastErrorAt != nil {
			d.LastErrorAt = *st.LastErrorAt
		}
		out = append(out, d)
	}
	return out
}

// listForwards is GET /forwards[?pool=]: every forward of this process
// with its target (no password), counts and last error. An unknown pool
// is 400 "the pool was not exists", as on the token routes.
func (s *Service) listForwards(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if _, ok := s.adminPool(w, pool); !ok {
			return
		}
	}
	respond.WriteJSON(w, http.StatusOK, s.forwardStatuses(pool))
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
