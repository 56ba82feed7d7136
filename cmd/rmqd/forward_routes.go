package main

import (
	"context"
	"net/http"
	"slices"

	"github.com/rmq-go/rmq/cmd/dashboard"
)

// forwardStatuses lists every forward of every pool (pool "" = all), in
// the order of the pools' names and of the command line.
func (s *service) forwardStatuses(pool string) []forwardStatus {
	out := []forwardStatus{}
	for _, name := range s.poolNames {
		if pool != "" && name != pool {
			continue
		}
		for _, f := range s.pools[name].forwards {
			out = append(out, f.status())
		}
	}
	return out
}

// dashboardForwards are the default pool's forwards for the dashboard,
// whose pages show that pool.
func (s *service) dashboardForwards(context.Context) []dashboard.Forward {
	var out []dashboard.Forward
	for _, f := range s.pools[defaultPool].forwards {
		st := f.status()
		d := dashboard.Forward{Topic: f.topic.Name(), Target: st.Target, Forwarded: st.Forwarded, Failed: st.Failed, LastError: st.LastError}
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
func (s *service) listForwards(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if _, ok := s.adminPool(w, pool); !ok {
			return
		}
	}
	writeJSON(w, http.StatusOK, s.forwardStatuses(pool))
}

// errForwarded is the 409 text of a consume from a forwarded queue.
const errForwarded = "queue is forwarded to a broker: consume it there"

// refuseForwarded wraps the consume route: a consume that names a queue
// this process forwards is refused (409), since a job it took would not
// reach the broker. Without forwards the route is served as it is.
func (s *service) refuseForwarded(h queueHandler) queueHandler {
	forwarded := false
	for _, p := range s.pools {
		forwarded = forwarded || len(p.forwards) > 0
	}
	if !forwarded {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, qr *queueReq) {
		if len(qr.pool.forwards) > 0 && slices.ContainsFunc(consumeQueues(qr.q), func(q string) bool {
			return qr.pool.forwardOf(qr.ns, q) != nil
		}) {
			writeError(w, http.StatusConflict, errForwarded)
			return
		}
		h(w, r, qr)
	}
}
