package admin

import (
	"net/http"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// Worker is one entry of GET /workers: a running client (an rmqd's pool,
// a program's rmq.Client) under a pool's prefix. Times are RFC 3339, UTC,
// with milliseconds.
type Worker struct {
	Pool        string   `json:"pool"`
	ID          string   `json:"id"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Version     string   `json:"version"`
	Started     string   `json:"started"`
	Seen        string   `json:"seen"`
	Topics      []string `json:"topics"`
	Concurrency int      `json:"concurrency"`
	InFlight    int      `json:"in_flight"`
}

const workerTime = "2006-01-02T15:04:05.000Z07:00"

// listWorkers is GET /workers[?pool=]: the running clients of every pool
// (or of one), by pool and id, as their heartbeat records say; a record two
// pools share (one Redis and prefix) is listed under the first. An unknown
// pool is 400 "the pool was not exists", as on the token routes.
func (s *handlers) listWorkers(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if _, ok := s.adminPool(w, pool); !ok {
			return
		}
	}
	out := []Worker{}
	// Two pools on one Redis and prefix list the same records: once.
	seen := map[string]bool{}
	for _, name := range s.PoolNames {
		if pool != "" && name != pool {
			continue
		}
		ws, err := s.Pools[name].Insp.Workers(r.Context())
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		for _, x := range ws {
			if seen[x.ID] {
				continue
			}
			seen[x.ID] = true
			out = append(out, Worker{Pool: name, ID: x.ID, Host: x.Host, PID: x.PID, Version: x.Version,
				Started: x.Started.UTC().Format(workerTime), Seen: x.Seen.UTC().Format(workerTime),
				Topics: append([]string{}, x.Topics...), Concurrency: x.Concurrency, InFlight: x.InFlight})
		}
	}
	respond.WriteJSON(w, http.StatusOK, out)
}
