package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// sseFrame is one frame of an event stream: an event (id, event, data)
// or a comment.
type sseFrame struct {
	id, event, data, comment string
}

// sseStream reads an event stream frame by frame.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	rd   *bufio.Reader
	stop context.CancelFunc
}

// openEvents opens GET …/events with headers ("Name: value"); the
// stream is closed when the test ends.
func (e *env) openEvents(path string, headers ...string) (*sseStream, answer) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.url(path), nil)
	require.NoError(e.t, err)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return nil, answer{resp.StatusCode, resp.Header, []byte(b.String())}
	}
	s := &sseStream{t: e.t, resp: resp, rd: bufio.NewReader(resp.Body), stop: cancel}
	e.t.Cleanup(s.close)
	return s, answer{status: resp.StatusCode, header: resp.Header}
}

func (s *sseStream) close() {
	s.stop()
	_ = s.resp.Body.Close()
}

// next reads the next frame; ok is false at the stream's end.
func (s *sseStream) next() (f sseFrame, ok bool) {
	s.t.Helper()
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return sseFrame{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if f != (sseFrame{}) {
				return f, true
			}
		case strings.HasPrefix(line, ":"):
			f.comment = strings.TrimSpace(line[1:])
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				f.id = v
			case "event":
				f.event = v
			case "data":
				f.data = v
			}
		}
	}
}

// nextEvent skips comments and events of other types than types.
func (s *sseStream) nextEvent(types ...string) sseFrame {
	s.t.Helper()
	for {
		f, ok := s.next()
		require.True(s.t, ok, "the stream ended")
		if f.comment == "" && (len(types) == 0 || contains(types, f.event)) {
			return f
		}
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// setLifecycle stores ns/q's lifecycle settings through the library.
func (e *env) setLifecycle(ns, q string, l rmq.Lifecycle) {
	e.t.Helper()
	p := e.svc.Pools[names.DefaultPool]
	tp, found, err := p.QueueTopic(context.Background(), ns, q)
	require.NoError(e.t, err)
	require.True(e.t, found, "publish to %s/%s first", ns, q)
	require.NoError(e.t, p.Insp.SetLifecycle(context.Background(), tp, l))
}

// consumeID consumes one job of ns/q with a long lease and returns its id.
func (e *env) consumeID(tok, ns, q string) string {
	e.t.Helper()
	a := do(e.t, "GET", e.url("/api/"+ns+"/"+q+"?ttr=600"), "", "X-Token: "+tok)
	require.Equal(e.t, http.StatusOK, a.status, "%s", a)
	return a.object(e.t)["job_id"].(string)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The event stream: each event with its cursor as id, its type as event
// and its JSON; resumed after a cursor from Last-Event-ID or ?after=; a
// bad cursor is a 400 before any stream.
func TestEventsStream(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	first := e.publish(tok, "ns", "q", "", "one")
	second := e.publish(tok, "ns", "q", "", "two")
	e.setLifecycle("ns", "q", rmq.Lifecycle{Events: 100, Retention: time.Minute})

	s, _ := e.openEvents("/api/ns/q/events?after=0", hdr)
	require.Equal(t, "text/event-stream; charset=utf-8", s.resp.Header.Get("Content-Type"))
	require.Equal(t, first, e.consumeID(tok, "ns", "q"))
	a := do(t, "PUT", e.url("/api/ns/q/job/"+first+"/progress"), "half", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"progress stored"}`, string(a.body))
	a = do(t, "POST", e.url("/api/ns/q/job/"+second+"/cancel"), "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"cancelled","job_id":"`+second+`"}`, string(a.body))

	// Other types (sent, delivered) may be recorded too: only these count.
	types := []string{"progress", "cancelled"}
	p := s.nextEvent(types...)
	require.Equal(t, "progress", p.event)
	require.NotEmpty(t, p.id)
	var ev map[string]any
	answer{body: []byte(p.data)}.json(t, &ev)
	require.Equal(t, first, ev["job_id"])
	require.Equal(t, "progress", ev["type"])
	require.Equal(t, b64("half"), ev["data"])
	_, err := time.Parse(time.RFC3339Nano, ev["time"].(string))
	require.NoError(t, err)
	c := s.nextEvent(types...)
	require.Equal(t, "cancelled", c.event)
	require.Contains(t, c.data, `"job_id":"`+second+`"`)
	s.close()

	// Resumed right after the progress event, by header and by query.
	r, _ := e.openEvents("/api/ns/q/events", hdr, "Last-Event-ID: "+p.id)
	require.Equal(t, c, r.nextEvent(types...))
	r.close()
	r, _ = e.openEvents("/api/ns/q/events?after="+url.QueryEscape(p.id), hdr)
	require.Equal(t, c, r.nextEvent(types...))
	r.close()

	for _, bad := range []string{"x", "e1 5=1-0", "e1 0=junk"} {
		_, a := e.openEvents("/api/ns/q/events", hdr, "Last-Event-ID: "+bad)
		requireError(t, a, http.StatusBadRequest, "invalid event cursor")
	}
	_, a = e.openEvents("/api/ns/q/events")
	requireError(t, a, http.StatusUnauthorized, "token not found")
	a = do(t, "HEAD", e.url("/api/ns/q/events"), "", hdr)
	require.Equal(t, http.StatusMethodNotAllowed, a.status, "a stream answers no HEAD")
	_, a = e.openEvents("/api/ns/q/events", "X-Token: nope")
	requireError(t, a, http.StatusUnauthorized, "invalid token")
}

// An idle stream says it is alive every EventPing; shutdown ends it (so
// http.Server.Shutdown does not wait for it), and streams count against
// the long-poll caps.
func TestEventsPingShutdownCap(t *testing.T) {
	e := newEnv(t, func(c *service.Config) {
		c.EventPing = 20 * time.Millisecond
		c.Quotas.MaxLongPollsPerToken = 1
	})
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	s, _ := e.openEvents("/api/ns/q/events", hdr)
	for {
		f, ok := s.next()
		require.True(t, ok)
		if f.comment == "ping" {
			break
		}
	}
	_, a := e.openEvents("/api/ns/q/events", hdr)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"too many long polls, please retry later"}`, string(a.body))
	a = do(t, "GET", e.url("/api/ns/q/job/x/wait?timeout=5"), "", hdr)
	require.Equal(t, http.StatusTooManyRequests, a.status, "a wait is a long poll too: %s", a)

	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, ok := s.next(); !ok {
				return
			}
		}
	}()
	e.svc.BeginShutdown()
	select {
	case <-ended:
	case <-time.After(waitLong):
		t.Fatal("shutdown did not end the event stream")
	}
	// Its place was given back (a stream opened while shutting down ends
	// at once).
	_, a = e.openEvents("/api/ns/q/events", hdr)
	require.NotEqual(t, http.StatusTooManyRequests, a.status, "%s", a)
}

// Deleting the token ends its open event streams, as it ends its long
// polls.
func TestEventsEndWhenTokenDeleted(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	s, _ := e.openEvents("/api/ns/q/events", "X-Token: "+tok)
	f, ok := s.next()
	require.True(t, ok)
	require.Equal(t, "ok", f.comment)
	a := do(t, "DELETE", e.admin.URL+"/token/ns/"+tok, "")
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, ok := s.next(); !ok {
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(waitLong):
		t.Fatal("the stream outlived its token")
	}
}
