package dashboard

import (
	"encoding/json"
	"net/http"
)

// apiTopic is one topic in the JSON snapshot the live charts poll. The
// browser derives rates from the difference of two snapshots.
type apiTopic struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Slots    int    `json:"slots"`
	Waiting  int64  `json:"waiting"`
	Due      int64  `json:"due"`
	Delayed  int64  `json:"delayed"`
	InFlight int64  `json:"inflight"`
	Dead     int64  `json:"dead"`
	Paused   bool   `json:"paused"`
	LagMs    int64  `json:"lag_ms"`
	Err      string `json:"error,omitempty"`
	// Flow control: the stored limits, the messages waiting in groups,
	// and the adaptive concurrency limit of each consuming client.
	Limits   string `json:"limits,omitempty"`
	Grouped  int64  `json:"grouped,omitempty"`
	Adaptive []int  `json:"adaptive,omitempty"`
	// Counters of this process (WithCounters), since it started.
	Sent    int64 `json:"sent,omitempty"`
	Acked   int64 `json:"acked,omitempty"`
	Retried int64 `json:"retried,omitempty"`
	Died    int64 `json:"died,omitempty"`
}

type apiOverview struct {
	TimeMs int64      `json:"time_ms"` // Redis's clock of the newest topic read
	Topics []apiTopic `json:"topics"`
}

func (h *handler) apiOverview(w http.ResponseWriter, r *http.Request) {
	rows, err := h.snapshot(r.Context())
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	out := apiOverview{Topics: make([]apiTopic, len(rows))}
	for j, row := range rows {
		st := row.Stats
		out.Topics[j] = apiTopic{
			Name: row.Topic.Name(), Type: row.Topic.Type().String(), Slots: row.Topic.SlotAmount(),
			Waiting: st.Store, Due: st.Due, Delayed: st.Delayed, InFlight: st.Prepare, Dead: st.Dead,
			Paused: st.Paused, LagMs: st.Lag().Milliseconds(), Err: row.Err,
			Limits: st.Limits.String(), Grouped: st.Grouped,
		}
		for _, a := range st.Adaptive {
			out.Topics[j].Adaptive = append(out.Topics[j].Adaptive, a.Limit)
		}
		if h.cfg.counters != nil {
			c := h.cfg.counters.snapshot(row.Topic.Name())
			tp := &out.Topics[j]
			tp.Sent, tp.Acked, tp.Retried, tp.Died = c.Sent, c.Acked, c.Retried, c.Dead
		}
		out.TimeMs = max(out.TimeMs, st.Now.UnixMilli())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
