package api

// api_events.go: GET /api/{ns}/{q}/events, a queue's event log
// (rmq.Client.Events) as a Server-Sent Events stream.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// EventJSON is the data line of one event of the stream; data is standard
// base64 (as a job's data), absent when the event carries none; time is
// Redis's clock, RFC 3339 in UTC up to the ns.
type EventJSON struct {
	JobID   string `json:"job_id"`
	Type    string `json:"type"`
	Attempt int    `json:"attempt"`
	Time    string `json:"time"`
	Data    []byte `json:"data,omitempty"`
}

// ErrInvalidEventCursor is the 400 text of a Last-Event-ID (or ?after=)
// no event of the queue gave.
const ErrInvalidEventCursor = "invalid event cursor"

// eventWriteGrace is how long one write of the stream may take: the
// server's write timeout is for answers, not for a stream that lasts.
const eventWriteGrace = time.Minute

// events streams the queue's events after Last-Event-ID (else ?after=;
// neither: from now on, "0": from the oldest kept) until the client goes
// away, its token is deleted or shutdown begins, with a comment every
// EventPing when there is nothing to say.
func (s *handlers) events(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	t, _, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !validCursor(after, t.SlotAmount()) {
		respond.WriteError(w, http.StatusBadRequest, ErrInvalidEventCursor)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.Stopping, cancel)
	defer stop()
	items, done := follow(ctx, qr.Pool.Client.Events(ctx, t, after))
	defer func() { cancel(); done() }() // the follower ends with ctx

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set(respond.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteGrace))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.WriteHeader(http.StatusOK)
	if !send([]byte(": ok\n\n")) {
		return
	}
	ping := time.NewTicker(s.Cfg.EventPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if !send([]byte(": ping\n\n")) {
				return
			}
		case it, open := <-items:
			if !open {
				return
			}
			if it.err != nil {
				if ctx.Err() == nil {
					s.Log.WarnContext(ctx, "rmqd: event stream ended", "request_id", respond.RequestID(w), "err", it.err)
				}
				return
			}
			if !send(eventFrame(it.ev)) {
				return
			}
			ping.Reset(s.Cfg.EventPing)
		}
	}
}

// eventItem is one step of an event sequence.
type eventItem struct {
	ev  rmq.Event
	err error
}

// follow ranges over seq in a goroutine of its own (the sequence blocks
// for new events; the stream must also ping and see its end), handing
// each step on through items, closed after an error or once ctx ends.
// done waits for the goroutine; ctx must have ended by then.
func follow(ctx context.Context, seq func(func(rmq.Event, error) bool)) (items <-chan eventItem, done func()) {
	ch := make(chan eventItem)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		for ev, err := range seq {
			select {
			case ch <- eventItem{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, wg.Wait
}

// eventFrame is one event as the stream sends it: its cursor as the id
// (a cursor holds no line break), its type as the event name.
func eventFrame(ev rmq.Event) []byte {
	data, _ := json.Marshal(EventJSON{JobID: ev.MessageID, Type: string(ev.Type), Attempt: ev.Attempt,
		Time: ev.Time.UTC().Format(time.RFC3339Nano), Data: ev.Data})
	b := make([]byte, 0, len(data)+len(ev.Cursor)+len(ev.Type)+32)
	b = append(b, "id: "...)
	b = append(b, ev.Cursor...)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// validCursor reports whether after is a cursor the queue's events take:
// it is checked before the stream's 200, so that a bad one is a 400 (an
// EventSource gives up on it, where it would reconnect for ever to a
// stream that ends at once). life.Follow checks a cursor before anything
// else and before any I/O; with a context already ended it says at once
// whether it took the cursor (then it yields the context's error).
func validCursor(after string, slotAmount int) bool {
	if after == "" || after == "0" {
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	streams := make([]string, slotAmount)
	for i := range streams {
		streams[i] = keyspace.LifeKeysFor("probe", "probe", i).Events
	}
	for _, err := range life.Follow(ctx, nil, streams, after) {
		return !errors.Is(err, life.ErrInvalidCursor)
	}
	return true
}
