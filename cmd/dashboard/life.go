package dashboard

// A job's life after hand-off on the dashboard: the message page's result,
// progress and events, the cancel action, and the live event feed of a
// topic (events, served by eventStream as Server-Sent Events from the
// topic's event log through rmq.Client.Events).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// cancelOp is the cancel action: each id is cancelled wherever it waits
// or runs (rmq.Inspector.Cancel).
var cancelOp = op{needIDs: true, verb: "Cancel",
	ask: func(t topic.Topic, ids []string) string {
		return fmt.Sprintf("Cancel %s of %s? A waiting one never runs; a running handler sees its context cancelled.", count(len(ids), "message"), t.Name())
	},
	run: func(h *handler, ctx context.Context, t topic.Topic, ids []string) (string, error) {
		n := 0
		for _, id := range ids {
			ok, err := h.insp.Cancel(ctx, t, id)
			if err != nil {
				return "", err
			}
			if ok {
				n++
			}
		}
		return fmt.Sprintf("Cancelled %s.", count(n, "message")), nil
	}}

// eventRow is one event of the message page.
type eventRow struct {
	Type    string
	Attempt int
	Time    time.Time
	Data    string
}

// maxEventScan bounds how many of a slot log's newest entries the message
// page reads to find the message's events; maxMessageEvents how many it
// shows (the newest).
const (
	maxEventScan     = 1000
	maxMessageEvents = 50
)

// messageEvents returns the events of id recorded in its slot's event log
// among the log's newest maxEventScan entries, oldest first.
//
// The public API follows a log (rmq.Client.Events blocks for new events)
// but offers no bounded read, which a page needs: it must answer without
// waiting. The read belongs in the Inspector, as
// Inspector.MessageEvents(ctx, t, id, n) ([]rmq.Event, error): the last n
// events of id, read from its slot's log without blocking. Until then it
// is here, reading the stream by XREVRANGE with a COUNT, and decoding its
// entries (fields t, id, a, d; the time is the entry id's) as the
// library's log reader does.
func (h *handler) messageEvents(ctx context.Context, t topic.Topic, slot int, id string) ([]eventRow, error) {
	key := keyspace.LifeKeysFor(h.cfg.keyPrefix, t.Name(), slot).Events
	msgs, err := h.rdb.XRevRangeN(ctx, key, "+", "-", maxEventScan).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []eventRow
	for _, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		if str("id") != id || str("t") == "" {
			continue
		}
		e := eventRow{Type: str("t"), Data: str("d")}
		e.Attempt, _ = strconv.Atoi(str("a"))
		ms, _, _ := strings.Cut(m.ID, "-")
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			e.Time = time.UnixMilli(n)
		}
		out = append(out, e)
		if len(out) == maxMessageEvents {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// lifeOf fills the message page's part of a job's life: the topic's
// lifecycle settings and the message's events.
func (h *handler) lifeOf(ctx context.Context, t topic.Topic, d *messageData) error {
	l, err := h.insp.Lifecycle(ctx, t)
	if err != nil {
		return err
	}
	d.Life = l
	if l.Events > 0 {
		d.Events, err = h.messageEvents(ctx, t, d.M.Slot, d.M.ID)
	}
	return err
}

// finishedItem is a retained finished message of the finished listing.
type finishedItem struct {
	ID, State string
	Finished  time.Time
	Result    string
	Truncated bool
}

// maxListedResult bounds the part of a result the finished listing shows.
const maxListedResult = 200

// finished lists t's retained finished messages (completed or cancelled),
// the latest to go first (the records of a topic whose retention never
// changed go in the order they finished: newest first), from the cursor.
//
// The Inspector answers for one retained message (Message) but lists none.
// The listing belongs there, as Inspector.Finished(ctx, t, opts
// ...ListOption) ([]MessageInfo, error), paged by WithCursor and WithLimit
// like Dead. Until then it is here: the slots' retention sets (id -> when
// its record goes) read by rank around a cursor (listZKeys), and each id's
// record through Inspector.Message.
func (h *handler) finished(ctx context.Context, t topic.Topic, cursor string, limit int) ([]finishedItem, string, error) {
	keys := make([]string, t.SlotAmount())
	for s := range keys {
		keys[s] = keyspace.LifeKeysFor(h.cfg.keyPrefix, t.Name(), s).DoneQ
	}
	items, next, err := h.listZKeys(ctx, keys, zorder{rev: true}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]finishedItem, 0, len(items))
	for _, it := range items {
		f, ok, err := h.finishedOne(ctx, t, it.ID)
		if err != nil {
			return nil, "", err
		}
		if ok {
			out = append(out, f)
		}
	}
	return out, next, nil
}

// finishedOne is the finished listing's row of id, and false when t keeps
// no finished message of that id: its retention passed, or it was never
// finished, or it was sent again since.
func (h *handler) finishedOne(ctx context.Context, t topic.Topic, id string) (finishedItem, bool, error) {
	m, err := h.insp.Message(ctx, t, id)
	if errors.Is(err, errMessageNotFound) {
		return finishedItem{}, false, nil
	}
	if err != nil || (m.State != rmq.StateCompleted && m.State != rmq.StateCancelled) {
		return finishedItem{}, false, err
	}
	f := finishedItem{ID: m.ID, State: stateNames[m.State], Finished: m.FinishedAt, Result: string(m.Result)}
	if len(f.Result) > maxListedResult {
		f.Result, f.Truncated = strings.ToValidUTF8(f.Result[:maxListedResult], ""), true
	}
	return f, true, nil
}

type finishedData struct {
	Topic       topic.Topic
	Life        rmq.Lifecycle
	Items       []finishedItem
	First, Next string
	// Search is the id looked for (finished?topic=…&id=…): Items is then
	// its row, or empty when the topic keeps no finished message of it.
	Search string
}

// finishedPage lists a retaining topic's finished messages, paged.
func (h *handler) finishedPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := h.lookup(ctx, q.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := finishedData{Topic: t}
	if d.Life, err = h.insp.Lifecycle(ctx, t); err != nil {
		h.failErr(w, r, err)
		return
	}
	if d.Search = strings.TrimSpace(q.Get("id")); d.Search != "" {
		f, ok, err := h.finishedOne(ctx, t, d.Search)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		if ok {
			d.Items = []finishedItem{f}
		}
		d.First = "finished?" + url.Values{"topic": {t.Name()}}.Encode()
		h.render(w, r, http.StatusOK, "finished", t.Name()+" finished", d)
		return
	}
	var next string
	if d.Items, next, err = h.finished(ctx, t, q.Get("c"), h.cfg.pageSize); err != nil {
		h.failErr(w, r, err)
		return
	}
	page := func(c string) string {
		v := url.Values{"topic": {t.Name()}}
		if c != "" {
			v.Set("c", c)
		}
		return "finished?" + v.Encode()
	}
	if q.Get("c") != "" {
		d.First = page("")
	}
	if next != "" {
		d.Next = page(next)
	}
	h.render(w, r, http.StatusOK, "finished", t.Name()+" finished", d)
}

type eventsData struct {
	Topic topic.Topic
	Life  rmq.Lifecycle
	// Stream is the URL of the feed's event stream; FromStart the page
	// that replays the log from the oldest event kept.
	Stream, FromStart string
	Start             bool
}

// eventsPage is the live event feed of a topic: the page's script opens
// eventStream and appends each event to a list.
func (h *handler) eventsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := h.lookup(ctx, q.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	l, err := h.insp.Lifecycle(ctx, t)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := eventsData{Topic: t, Life: l, Start: q.Get("from") == "start",
		FromStart: "events?" + url.Values{"topic": {t.Name()}, "from": {"start"}}.Encode()}
	sv := url.Values{"topic": {t.Name()}}
	if d.Start {
		sv.Set("after", "0")
	}
	d.Stream = "events/stream?" + sv.Encode()
	h.render(w, r, http.StatusOK, "events", t.Name()+" events", d)
}

// sseEvent is the data of one event of the stream.
type sseEvent struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	TimeMS  int64  `json:"time_ms"`
	Data    string `json:"data,omitempty"`
}

// eventStream serves a topic's events as Server-Sent Events, one per
// event, flushed as it comes, from the position after names ("" or
// absent: from now; "0": the oldest kept; else an event's cursor). Each
// event's SSE id is its cursor, so a browser that reconnects resumes right
// after the last event it received (Last-Event-ID). It ends when the
// request's context does: the log's readers are the request's own and
// stop with it.
func (h *handler) eventStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	t, err := h.lookup(ctx, q.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	after := q.Get("after")
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		after = last
	}
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A comment first, so the browser's EventSource opens now rather than
	// at the first event.
	if _, err := fmt.Fprint(w, ": rmq events of "+t.Name()+"\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for ev, err := range h.client.Events(ctx, t, after) {
		if err != nil {
			if ctx.Err() == nil {
				if !errors.Is(err, rmq.ErrInvalidEventCursor) {
					h.log.ErrorContext(ctx, "dashboard: event stream", "topic", t.Name(), "err", err)
				}
				b, _ := json.Marshal(err.Error())
				fmt.Fprintf(w, "event: failure\ndata: %s\n\n", b)
				_ = rc.Flush()
			}
			return
		}
		b, _ := json.Marshal(sseEvent{Type: string(ev.Type), ID: ev.MessageID, Attempt: ev.Attempt,
			TimeMS: ev.Time.UnixMilli(), Data: string(ev.Data)})
		// A cursor is one line ("e1 3=…"): a valid SSE id.
		if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.Cursor, b); err != nil || rc.Flush() != nil {
			return // the browser left
		}
	}
}
