package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/rmq-go/rmq/rmq"
)

type workersData struct {
	Workers           []rmq.WorkerInfo
	Hosts             int
	InFlight, Handles int
}

// workersPage lists the fleet: every started client's record
// (rmq.Inspector.Workers), by host and process. A record is refreshed
// every 10 s and lapses 30 s after its process stops refreshing it; a
// closed client deletes its own.
func (h *handler) workersPage(w http.ResponseWriter, r *http.Request) {
	if h.initErr != nil {
		h.failErr(w, r, h.initErr)
		return
	}
	ws, err := h.insp.Workers(r.Context())
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	sortWorkers(ws)
	d := workersData{Workers: ws}
	hosts := map[string]bool{}
	for _, wi := range ws {
		hosts[wi.Host] = true
		d.InFlight += wi.InFlight
		d.Handles += wi.Concurrency
	}
	d.Hosts = len(hosts)
	h.render(w, r, http.StatusOK, "workers", "Workers", d)
}

// workersOf lists the running clients that consume or pull the topic.
func (h *handler) workersOf(ctx context.Context, name string) ([]rmq.WorkerInfo, error) {
	ws, err := h.insp.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := ws[:0]
	for _, w := range ws {
		if slices.Contains(w.Topics, name) {
			out = append(out, w)
		}
	}
	sortWorkers(out)
	return out, nil
}

func sortWorkers(ws []rmq.WorkerInfo) {
	slices.SortFunc(ws, func(a, b rmq.WorkerInfo) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		if a.PID != b.PID {
			return a.PID - b.PID
		}
		return strings.Compare(a.ID, b.ID)
	})
}
