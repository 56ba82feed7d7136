package dashboard

// The history charts: every client of a topic counts, per minute, what it
// sent and how its deliveries ended, and writes the counts to Redis
// (rmq.Inspector.History). api/history serves them to the charts of the
// overview (every topic, and all of them together) and of a topic's page,
// in buckets of the chart's range, so a page draws the last hour, day or
// three days as soon as it loads, from any process, after a reload or a
// restart of the dashboard's. The page then asks for the newest buckets
// every 2 s, so the charts' last points follow what the fleet writes.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// histRange is a chart range and the bucket its points sum.
type histRange struct {
	Name       string
	span, step time.Duration
}

// histRanges are the ranges a chart offers: at most 144 points each.
var histRanges = []histRange{
	{"1h", time.Hour, time.Minute},
	{"24h", 24 * time.Hour, 10 * time.Minute},
	{"72h", 72 * time.Hour, 30 * time.Minute},
}

func rangeOf(name string) histRange {
	for _, r := range histRanges {
		if r.Name == name {
			return r
		}
	}
	return histRanges[0]
}

// apiPoint is one bucket of a topic's history (a zero is left out of the
// JSON: most minutes of most topics are quiet): the counts of its minutes
// summed, the 99th percentiles their largest, the medians their mean
// weighted by the minutes' deliveries (an estimate: medians do not add).
type apiPoint struct {
	TimeMs        int64   `json:"t"` // the bucket's start
	Sent          int64   `json:"sent,omitempty"`
	Completed     int64   `json:"completed,omitempty"`
	Retried       int64   `json:"retried,omitempty"`
	Dead          int64   `json:"dead,omitempty"`
	Expired       int64   `json:"expired,omitempty"`
	Cancelled     int64   `json:"cancelled,omitempty"`
	Forwarded     int64   `json:"forwarded,omitempty"`
	HandlerP50Ms  float64 `json:"handler_p50_ms,omitempty"`
	HandlerP99Ms  float64 `json:"handler_p99_ms,omitempty"`
	LatenessP50Ms float64 `json:"lateness_p50_ms,omitempty"`
	LatenessP99Ms float64 `json:"lateness_p99_ms,omitempty"`
	// weights of the medians so far (not served)
	hw, lw float64
}

type apiHistoryTopic struct {
	Name   string     `json:"name"`
	Points []apiPoint `json:"points"`
	Err    string     `json:"error,omitempty"`
}

type apiHistory struct {
	Range  string            `json:"range"`
	StepMs int64             `json:"step_ms"`
	FromMs int64             `json:"from_ms"`
	NowMs  int64             `json:"now_ms"`
	Topics []apiHistoryTopic `json:"topics"`
	// Total is every topic's buckets added up (the overview's "all
	// topics"); absent for one topic.
	Total []apiPoint `json:"total,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// add adds one minute, or one bucket (weights given), into p.
func (p *apiPoint) add(q apiPoint, hw, lw float64) {
	p.Sent += q.Sent
	p.Completed += q.Completed
	p.Retried += q.Retried
	p.Dead += q.Dead
	p.Expired += q.Expired
	p.Cancelled += q.Cancelled
	p.Forwarded += q.Forwarded
	p.HandlerP99Ms = max(p.HandlerP99Ms, q.HandlerP99Ms)
	p.LatenessP99Ms = max(p.LatenessP99Ms, q.LatenessP99Ms)
	if hw > 0 && q.HandlerP50Ms > 0 {
		p.HandlerP50Ms = (p.HandlerP50Ms*p.hw + q.HandlerP50Ms*hw) / (p.hw + hw)
		p.hw += hw
	}
	if lw > 0 && q.LatenessP50Ms > 0 {
		p.LatenessP50Ms = (p.LatenessP50Ms*p.lw + q.LatenessP50Ms*lw) / (p.lw + lw)
		p.lw += lw
	}
}

// bucketed sums a topic's minutes from `from` on into buckets of step.
func bucketed(pts []rmq.MetricPoint, from time.Time, step time.Duration) []apiPoint {
	var out []apiPoint
	for _, m := range pts {
		if m.Minute.Before(from) {
			continue
		}
		start := m.Minute.Truncate(step).UnixMilli()
		if len(out) == 0 || out[len(out)-1].TimeMs != start {
			out = append(out, apiPoint{TimeMs: start})
		}
		q := apiPoint{Sent: m.Sent, Completed: m.Completed, Retried: m.Retried, Dead: m.Dead, Expired: m.Expired,
			Cancelled: m.Cancelled, Forwarded: m.Forwarded,
			HandlerP50Ms: ms(m.HandlerP50), HandlerP99Ms: ms(m.HandlerP99),
			LatenessP50Ms: ms(m.LatenessP50), LatenessP99Ms: ms(m.LatenessP99)}
		// Handler time is measured on deliveries that ended; lateness on
		// the ones delivered, about as many.
		w := float64(m.Completed + m.Retried + m.Dead)
		out[len(out)-1].add(q, max(w, 1), max(w, 1))
	}
	return out
}

// total adds up the topics' buckets (all have the same starts).
func total(ts []apiHistoryTopic) []apiPoint {
	var out []apiPoint
	for _, t := range ts {
		if t.Err != "" {
			continue
		}
		if out == nil {
			out = make([]apiPoint, len(t.Points))
			for j, p := range t.Points {
				out[j].TimeMs = p.TimeMs
			}
		}
		for j, p := range t.Points {
			if j < len(out) && out[j].TimeMs == p.TimeMs {
				w := float64(p.Completed + p.Retried + p.Dead)
				out[j].add(p, w, w)
			}
		}
	}
	return out
}

// history reads the buckets of range r of the topics, from since (the
// start of the range when zero or earlier).
func (h *handler) history(ctx context.Context, ts []topic.Topic, r histRange, since time.Time) apiHistory {
	now := time.Now()
	from := now.Add(-r.span).Truncate(r.step)
	if since.After(from) {
		from = since.Truncate(r.step)
	}
	out := apiHistory{Range: r.Name, StepMs: r.step.Milliseconds(), FromMs: from.UnixMilli(), NowMs: now.UnixMilli(),
		Topics: make([]apiHistoryTopic, len(ts))}
	for j, t := range ts {
		out.Topics[j].Name = t.Name()
		pts, err := h.insp.History(ctx, t, from)
		if err != nil {
			out.Topics[j].Err = err.Error()
			continue
		}
		out.Topics[j].Points = bucketed(pts, from, r.step)
	}
	return out
}

// apiHistoryHandler serves GET api/history?range=1h|24h|72h, of every
// topic and their total, or of one (&topic=…); &since= (ms since the
// epoch) asks only for the buckets from the one holding it, as the charts
// do every 2 s.
func (h *handler) apiHistoryHandler(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	var ts []topic.Topic
	if name := q.Get("topic"); name != "" {
		t, err := h.lookup(ctx, name)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		ts = []topic.Topic{t}
	} else {
		if h.initErr != nil {
			h.failErr(w, r, h.initErr)
			return
		}
		var err error
		if ts, err = h.insp.Topics(ctx); err != nil {
			h.failErr(w, r, err)
			return
		}
	}
	var since time.Time
	if s := q.Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, "since: want milliseconds since the epoch")
			return
		}
		since = time.UnixMilli(n)
	}
	out := h.history(ctx, ts, rangeOf(q.Get("range")), since)
	if q.Get("topic") == "" {
		out.Total = total(out.Topics)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// historyView is what the history section of a page needs.
type historyView struct {
	Src, Range, Step string
	Topic            bool // one topic's charts
	Tabs             []historyTab
}

type historyTab struct {
	Name, Href string
	On         bool
}

// historyOf is the history section of the page at self (a path with its
// query, "" for the overview), for one topic when name is not "".
func historyOf(q url.Values, self, name string) historyView {
	r := rangeOf(q.Get("range"))
	v := historyView{Src: "api/history", Range: r.Name, Topic: name != ""}
	switch r.step {
	case time.Minute:
		v.Step = "minute"
	default:
		v.Step = strings.TrimSuffix(r.step.String(), "0s")
	}
	if name != "" {
		v.Src += "?" + url.Values{"topic": {name}}.Encode()
	}
	for _, hr := range histRanges {
		sep := "?"
		if strings.Contains(self, "?") {
			sep = "&"
		}
		base := self
		if base == "" {
			base = "./"
		}
		v.Tabs = append(v.Tabs, historyTab{Name: hr.Name, Href: base + sep + "range=" + hr.Name + "#history", On: hr == r})
	}
	return v
}
