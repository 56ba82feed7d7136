package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// setLife stores t's lifecycle settings.
func (e *env) setLife(t topic.Topic, l rmq.Lifecycle) {
	e.t.Helper()
	require.NoError(e.t, e.insp.SetLifecycle(context.Background(), t, l))
}

// A waiting message of a retaining topic with an event log: its page
// offers Cancel; the confirmed action cancels it and comes back to its
// page, which then shows it cancelled, when, and its cancelled event.
func TestCancelWaitingFromItsPage(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.setLife(tp, rmq.Lifecycle{Retention: time.Hour, Events: 100})
	e.send(tp, "job-1", `{"n":1}`)
	self := "message?" + url.Values{"topic": {"jobs"}, "id": {"job-1"}}.Encode()
	page := e.get(self)
	assert.Contains(t, page, `<span class="badge state">waiting</span>`)
	assert.Contains(t, page, `<button name="op" value="cancel" class="danger" id="cancel">Cancel</button>`)
	assert.Contains(t, page, `<input type="hidden" name="return" value="`+strings.ReplaceAll(self, "&", "&amp;")+`">`,
		"a retaining topic's message page is where the cancel goes back to")

	code, _, ask := e.post(url.Values{"op": {"cancel"}, "topic": {"jobs"}, "id": {"job-1"}, "return": {self}})
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, ask, "Cancel 1 message of jobs?")
	assert.Equal(t, int64(1), e.stats(tp).Store, "nothing changes before the confirmation")

	loc := e.actLoc(url.Values{"op": {"cancel"}, "topic": {"jobs"}, "id": {"job-1"}, "return": {self}})
	assert.Equal(t, "message", loc.Path)
	assert.Equal(t, "Cancelled 1 message.", loc.Query().Get("flash"))
	assert.Equal(t, int64(0), e.stats(tp).Store)
	page = e.get(loc.String())
	assert.Contains(t, page, `<p class="flash" id="flash">Cancelled 1 message.</p>`)
	assert.Contains(t, page, `<span class="badge state">cancelled</span>`)
	assert.Contains(t, page, `id="finished"`)
	assert.NotContains(t, page, `id="cancel"`, "a cancelled message cannot be cancelled again")
	assert.Contains(t, page, `<span class="badge ev-cancelled">cancelled</span>`, "its event, from the log")

	assert.Equal(t, "Cancelled 0 messages.", e.act(url.Values{"op": {"cancel"}, "topic": {"jobs"}, "id": {"job-1", "nosuch"}}),
		"a finished or unknown id is not cancelled")
}

// An in-flight delivery is cancelled from the message page's form (the
// topic page's row offers it too). The topic retains nothing, so the form
// goes back to the topic, and the message is gone. (What its handler sees
// is the consumers' side, tested with them.)
func TestCancelInFlight(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("renders", topic.Priority, 2)
	running, release := make(chan string, 1), make(chan struct{})
	e.client(tp, func(ctx context.Context, m *consumer.Message) error {
		running <- m.ID
		select {
		case <-ctx.Done():
		case <-release: // the test's end: Close waits for its handlers
		}
		return nil
	})
	t.Cleanup(func() { close(release) }) // before the client's Close (cleanups run in reverse)
	e.send(tp, "r-1", "x")
	select {
	case <-running:
	case <-time.After(waitLong):
		t.Fatal("not delivered")
	}
	page := e.get("message?topic=renders&id=r-1")
	assert.Contains(t, page, `<span class="badge state">in flight</span>`)
	assert.Contains(t, page, `<input type="hidden" name="return" value="topic?name=renders">`)
	assert.Contains(t, page, `id="cancel"`)
	topicPage := e.get("topic?name=renders")
	assert.Contains(t, topicPage, `<input type="hidden" name="op" value="cancel">`, "the in-flight row offers cancel")

	loc := e.actLoc(url.Values{"op": {"cancel"}, "topic": {"renders"}, "id": {"r-1"}, "return": {"topic?name=renders"}})
	assert.Equal(t, "Cancelled 1 message.", loc.Query().Get("flash"))
	assert.Equal(t, "topic", loc.Path)
	code, _, _ := e.do(http.MethodGet, "message?topic=renders&id=r-1", nil, nil)
	assert.Equal(t, http.StatusNotFound, code, "a topic that retains nothing forgets it")
}

func TestCancelHiddenAndRefusedReadOnly(t *testing.T) {
	e := newEnv(t, dashboard.WithReadOnly())
	tp := e.topic("jobs", topic.FixedTime, 2)
	e.send(tp, "job-1", "x")
	assert.NotContains(t, e.get("message?topic=jobs&id=job-1"), `id="cancel"`)
	assert.NotContains(t, e.get("topic?name=jobs"), `value="cancel"`)
	code, _, _ := e.do(http.MethodPost, "action", url.Values{"op": {"cancel"}, "topic": {"jobs"}, "id": {"job-1"}, "confirm": {"yes"}},
		map[string]string{"Origin": e.srv.URL})
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, int64(1), e.stats(tp).Store)
}

// sseReader reads one event stream of the dashboard.
type sseReader struct {
	t      *testing.T
	cancel context.CancelFunc
	res    *http.Response
	lines  *bufio.Scanner
}

func (e *env) openStream(path string, hdr map[string]string) *sseReader {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+mount+"/"+path, nil)
	require.NoError(e.t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	s := &sseReader{t: e.t, cancel: cancel, res: res, lines: bufio.NewScanner(res.Body)}
	e.t.Cleanup(s.close)
	return s
}

func (s *sseReader) close() { s.cancel(); s.res.Body.Close() }

// sseEvent is one event of a stream: its id (the cursor) and data.
type sseEvent struct {
	Cursor string
	Type   string `json:"type"`
	ID     string `json:"id"`
	Data   string `json:"data"`
}

// next returns the stream's next event (comments skipped); a stream that
// stalls fails the test through the reader's context.
func (s *sseReader) next() sseEvent {
	s.t.Helper()
	stop := time.AfterFunc(waitLong, s.cancel)
	defer stop.Stop()
	var ev sseEvent
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "" && ev.Type != "":
			return ev
		case strings.HasPrefix(line, "id: "):
			ev.Cursor = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(s.t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev))
		}
	}
	s.t.Fatalf("the stream ended: %v", s.lines.Err())
	return ev
}

// The event stream serves the topic's log as Server-Sent Events, each
// flushed as it is recorded, with its cursor as the SSE id; a browser
// reconnecting with Last-Event-ID resumes right after it.
func TestEventStream(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.setLife(tp, rmq.Lifecycle{Events: 100})
	e.send(tp, "a", "x")
	e.send(tp, "b", "y")
	s := e.openStream("events/stream?topic=jobs&after=0", nil)
	require.Equal(t, http.StatusOK, s.res.StatusCode)
	assert.Equal(t, "text/event-stream", s.res.Header.Get("Content-Type"))
	ok, err := e.insp.Cancel(context.Background(), tp, "a")
	require.NoError(t, err)
	require.True(t, ok)
	var first sseEvent
	for first.Type != "cancelled" {
		first = s.next()
	}
	assert.Equal(t, "a", first.ID)
	assert.True(t, strings.HasPrefix(first.Cursor, "e1 "), first.Cursor)

	// Resumed after a's cancellation: b's is the next cancelled event, and
	// a's is not served again.
	r := e.openStream("events/stream?topic=jobs", map[string]string{"Last-Event-ID": first.Cursor})
	ok, err = e.insp.Cancel(context.Background(), tp, "b")
	require.NoError(t, err)
	require.True(t, ok)
	for {
		ev := r.next()
		require.NotEqual(t, "a", ev.ID, "an event before the cursor served again")
		if ev.Type == "cancelled" {
			assert.Equal(t, "b", ev.ID)
			break
		}
	}
	// A bad cursor: one failure event, and the stream ends.
	bad := e.openStream("events/stream?topic=jobs&after=nosuch", nil)
	b, err := io.ReadAll(bad.res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), "event: failure\ndata: \"rmq: invalid event cursor")
	code, _, _ := e.do(http.MethodGet, "events/stream?topic=nosuch", nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestEventsPage(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "a", "x")
	page := e.get("events?topic=jobs")
	assert.Contains(t, page, `data-src="events/stream?topic=jobs"`)
	assert.Contains(t, page, `id="no-log"`, "a topic without a log says so")
	e.setLife(tp, rmq.Lifecycle{Events: 10})
	page = e.get("events?topic=jobs&from=start")
	assert.Contains(t, page, `data-src="events/stream?after=0&amp;topic=jobs"`)
	assert.NotContains(t, page, `id="no-log"`)
	assert.Contains(t, e.get("topic?name=jobs"), `href="events?topic=jobs" id="events-link"`)
}
