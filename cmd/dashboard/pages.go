package dashboard

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// topicRow is one line of the overview.
type topicRow struct {
	Topic topic.Topic
	Stats topicStats
	Err   string
}

type overviewData struct {
	Topics []topicRow
	Redis  []redisNode
	// Counters is true when the rate charts of WithCounters are drawn;
	// Lateness is then the firing-lateness histogram of every topic.
	Counters    bool
	Lateness    []dueBucket
	LatenessMax int64
	Forwards    []Forward // WithForwards
	History     historyView
}

// snapshot reads every topic's counts: a few commands per slot, all from
// cardinalities and counts by score.
func (h *handler) snapshot(ctx context.Context) ([]topicRow, error) {
	if h.initErr != nil {
		return nil, h.initErr
	}
	ts, err := h.insp.Topics(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]topicRow, len(ts))
	for j, t := range ts {
		rows[j].Topic = t
		st, err := h.stats(ctx, t)
		if err != nil {
			rows[j].Err = err.Error()
			continue
		}
		rows[j].Stats = st
	}
	return rows, nil
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	rows, err := h.snapshot(r.Context())
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := overviewData{Topics: rows, Redis: h.redisNodes(r.Context()), Counters: h.cfg.counters != nil,
		Forwards: h.forwardsOf(r.Context()), History: historyOf(r.URL.Query(), "", "")}
	if d.Counters {
		d.Lateness = make([]dueBucket, len(latenessLabels))
		for j, l := range latenessLabels {
			d.Lateness[j].Label = l
			d.Lateness[j].Overdue = j >= 6 // a second late or more
		}
		for _, row := range rows {
			c := h.cfg.counters.snapshot(row.Topic.Name())
			for j, n := range c.Late {
				d.Lateness[j].Count += n
				d.LatenessMax = max(d.LatenessMax, d.Lateness[j].Count)
			}
		}
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// pageLinks are the cursors of a topic page's three listings, so that
// paging one keeps the others where they are.
type pageLinks struct {
	name, wc, yc, fc, dc string
}

func (p pageLinks) url() string {
	v := url.Values{"name": {p.name}}
	for k, c := range map[string]string{"wc": p.wc, "yc": p.yc, "fc": p.fc, "dc": p.dc} {
		if c != "" {
			v.Set(k, c)
		}
	}
	return "topic?" + v.Encode()
}

type topicData struct {
	Topic    topic.Topic
	Stats    topicStats
	Hist     []dueBucket
	HistMax  int64
	Waiting  []waitingItem
	Delayed  []waitingItem // priority topics: waiting for their time
	InFlight []inFlightItem
	Dead     []rmq.DeadMessage
	Forward  *Forward // WithForwards: where the topic's messages go
	History  historyView
	// Workers are the running clients that name the topic (Workers page).
	Workers []rmq.WorkerInfo
	// Links to the first and next pages of each listing ("" when none).
	Self                                                 string
	WaitingFirst, DelayedFirst, InFlightFirst, DeadFirst string
	WaitingNext, DelayedNext, InFlightNext, DeadNext     string
}

func (h *handler) lookup(ctx context.Context, name string) (topic.Topic, error) {
	if h.initErr != nil {
		return topic.Topic{}, h.initErr
	}
	return h.insp.Topic(ctx, name)
}

func (h *handler) topicPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := h.lookup(ctx, q.Get("name"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	cur := pageLinks{name: t.Name(), wc: q.Get("wc"), yc: q.Get("yc"), fc: q.Get("fc"), dc: q.Get("dc")}
	d := topicData{Topic: t, Self: cur.url(), Forward: h.forwardOf(ctx, t.Name())}
	d.History = historyOf(q, d.Self, t.Name())
	if d.Workers, err = h.workersOf(ctx, t.Name()); err != nil {
		h.failErr(w, r, err)
		return
	}
	if d.Stats, err = h.stats(ctx, t); err != nil {
		h.failErr(w, r, err)
		return
	}
	if d.Hist, err = h.dueHistogram(ctx, t, d.Stats.Now); err != nil {
		h.failErr(w, r, err)
		return
	}
	for _, b := range d.Hist {
		d.HistMax = max(d.HistMax, b.Count)
	}
	var wNext, yNext, fNext, dNext string
	if d.Waiting, wNext, err = h.waiting(ctx, t, cur.wc, h.cfg.pageSize); err != nil {
		h.failErr(w, r, err)
		return
	}
	if !t.Type().TimeBased() {
		if d.Delayed, yNext, err = h.delayedItems(ctx, t, cur.yc, h.cfg.pageSize); err != nil {
			h.failErr(w, r, err)
			return
		}
	}
	if d.InFlight, fNext, err = h.inFlight(ctx, t, cur.fc, h.cfg.pageSize); err != nil {
		h.failErr(w, r, err)
		return
	}
	opts := []rmq.ListOption{rmq.WithLimit(h.cfg.pageSize + 1), rmq.WithCursor(cur.dc)}
	if d.Dead, err = h.insp.Dead(ctx, t, opts...); err != nil {
		h.failErr(w, r, err)
		return
	}
	if len(d.Dead) > h.cfg.pageSize {
		d.Dead = d.Dead[:h.cfg.pageSize]
		dNext = d.Dead[len(d.Dead)-1].Cursor()
	}
	link := func(edit func(*pageLinks)) string {
		p := cur
		edit(&p)
		return p.url()
	}
	if cur.wc != "" {
		d.WaitingFirst = link(func(p *pageLinks) { p.wc = "" })
	}
	if cur.yc != "" {
		d.DelayedFirst = link(func(p *pageLinks) { p.yc = "" })
	}
	if yNext != "" {
		d.DelayedNext = link(func(p *pageLinks) { p.yc = yNext })
	}
	if cur.fc != "" {
		d.InFlightFirst = link(func(p *pageLinks) { p.fc = "" })
	}
	if cur.dc != "" {
		d.DeadFirst = link(func(p *pageLinks) { p.dc = "" })
	}
	if wNext != "" {
		d.WaitingNext = link(func(p *pageLinks) { p.wc = wNext })
	}
	if fNext != "" {
		d.InFlightNext = link(func(p *pageLinks) { p.fc = fNext })
	}
	if dNext != "" {
		d.DeadNext = link(func(p *pageLinks) { p.dc = dNext })
	}
	h.render(w, r, http.StatusOK, "topic", t.Name(), d)
}

// maxShownBody bounds the part of a body the message page shows.
const maxShownBody = 256 << 10

type messageData struct {
	M         messageInfo
	Self      string
	TopicURL  string
	View      string // text, json or hex
	Text      string
	ValidUTF8 bool
	JSON      string // "" when the body is not JSON
	Hex       string
	Truncated bool
	Size      int
	// Life is the topic's lifecycle settings, Events the message's events
	// from its event log (life.go); CancelReturn where the cancel action
	// goes back to: this page while the topic retains a cancelled
	// message, else the topic's.
	Life         rmq.Lifecycle
	Events       []eventRow
	CancelReturn string
	EventsURL    string
	// Flow is the flow the message is part of, from its root (flowtree.go);
	// nil when it is in none.
	Flow *flowNode
}

func (h *handler) messagePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := h.lookup(ctx, q.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	id := q.Get("id")
	if id == "" {
		h.fail(w, r, http.StatusBadRequest, "no message id given")
		return
	}
	m, err := h.message(ctx, t, id)
	if errors.Is(err, errMessageNotFound) {
		m, err = h.parentMessage(ctx, t, id) // flowtree.go
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := messageData{
		M:        m,
		Self:     "message?" + url.Values{"topic": {t.Name()}, "id": {id}}.Encode(),
		TopicURL: pageLinks{name: t.Name()}.url(),
		View:     q.Get("view"),
		Size:     len(m.Body),
	}
	if err := h.lifeOf(ctx, t, &d); err != nil {
		h.failErr(w, r, err)
		return
	}
	if d.Flow, err = h.flowOf(ctx, m); err != nil {
		h.failErr(w, r, err)
		return
	}
	d.EventsURL = "events?" + url.Values{"topic": {t.Name()}}.Encode()
	d.CancelReturn = d.TopicURL
	if d.Life.Retention > 0 {
		d.CancelReturn = d.Self
	}
	body := m.Body
	if len(body) > maxShownBody {
		body, d.Truncated = body[:maxShownBody], true
	}
	d.ValidUTF8 = utf8.Valid(body)
	d.Text = string(body) // html/template escapes it; invalid bytes show as U+FFFD
	var pretty bytes.Buffer
	if !d.Truncated && json.Valid(body) && json.Indent(&pretty, body, "", "  ") == nil {
		d.JSON = pretty.String() // as sent: json.Indent escapes nothing
	}
	switch d.View {
	case "text", "hex":
	case "json":
		if d.JSON == "" {
			d.View = "text"
		}
	default:
		d.View = "text"
		if d.JSON != "" {
			d.View = "json"
		} else if !d.ValidUTF8 {
			d.View = "hex"
		}
	}
	if d.View == "hex" {
		d.Hex = hex.Dump(body)
	}
	h.render(w, r, http.StatusOK, "message", m.ID, d)
}

// search opens the message page of an id: in the topic given, or in the
// first topic that has it.
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" {
		h.fail(w, r, http.StatusBadRequest, "no message id given")
		return
	}
	var names []string
	if name := q.Get("topic"); name != "" {
		names = []string{name}
	} else {
		rows, err := h.snapshotNames(ctx)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		names = rows
	}
	for _, name := range names {
		t, err := h.lookup(ctx, name)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		_, err = h.message(ctx, t, id)
		if err == nil {
			seeOther(w, "message?"+url.Values{"topic": {name}, "id": {id}}.Encode())
			return
		}
		if !errors.Is(err, errMessageNotFound) {
			h.failErr(w, r, err)
			return
		}
	}
	h.fail(w, r, http.StatusNotFound, "no message with id "+id)
}

func (h *handler) snapshotNames(ctx context.Context) ([]string, error) {
	if h.initErr != nil {
		return nil, h.initErr
	}
	ts, err := h.insp.Topics(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for j, t := range ts {
		out[j] = t.Name()
	}
	return out, nil
}

// seeOther redirects to loc relative to the request's URL, as the browser
// sees it (http.Redirect would resolve it against the path the dashboard
// sees, which lacks the mount prefix).
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}
