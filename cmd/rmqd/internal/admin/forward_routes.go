package admin

import (
	"context"
	"net/http"

	"github.com/rmq-go/rmq/cmd/dashboard"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// forwardStatuses lists every forward of every pool (pool "" = all), in
// the order of the pools' names and of the command line.
func (s *handlers) forwardStatuses(pool string) []forward.Status {
	out := []forward.Status{}
	for _, name := range s.PoolNames {
		if pool != "" && name != pool {
			continue
		}
		for _, f := range s.Pools[name].Forwards {
			out = append(out, f.Status())
		}
	}
	return out
}

// dashboardForwards are the default pool's forwards for the dashboard,
// whose pages show that pool.
func (s *handlers) dashboardForwards(context.Context) []dashboard.Forward {
	var out []dashboard.Forward
	for _, f := range s.Pools[names.DefaultPool].Forwards {
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
func (s *handlers) listForwards(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if _, ok := s.adminPool(w, pool); !ok {
			return
		}
	}
	respond.WriteJSON(w, http.StatusOK, s.forwardStatuses(pool))
}
