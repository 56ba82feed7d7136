package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
)

// lifeJSON decodes a job answer of the life routes.
func lifeJSON(t *testing.T, a answer) map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	return a.object(t)
}

// A wait on a job that gets cancelled meanwhile returns at once with the
// cancelled state; a wait that times out answers the state then; unknown
// jobs are 404; a bad timeout is 400.
func TestWaitJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	id := e.publish(tok, "ns", "q", "", "body")
	e.setLifecycle("ns", "q", rmq.Lifecycle{Retention: time.Minute})
	require.Equal(t, id, e.consumeID(tok, "ns", "q"))

	done := make(chan answer, 1)
	start := time.Now()
	go func() { done <- do(t, "GET", e.url("/api/ns/q/job/"+id+"/wait?timeout=60"), "", hdr) }()
	// Cancelled before or after the wait began: either way it answers the
	// retained cancelled state (a wait registers, then reads the state).
	a := do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var got answer
	select {
	case got = <-done:
	case <-time.After(waitLong):
		t.Fatal("the wait did not end when its job was cancelled")
	}
	require.Less(t, time.Since(start), 30*time.Second)
	m := lifeJSON(t, got)
	require.Equal(t, "cancelled", m["state"])
	require.Equal(t, id, m["job_id"])
	require.Equal(t, b64("body"), m["data"])
	_, err := time.Parse(time.RFC3339Nano, m["finished_at"].(string))
	require.NoError(t, err)

	// Kept by the queue's retention: GET …/job and a wait without timeout
	// say cancelled too; a second cancel finds nothing to cancel.
	m = lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr))
	require.Equal(t, "cancelled", m["state"])
	m = lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id+"/wait"), "", hdr))
	require.Equal(t, "cancelled", m["state"])
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr), http.StatusNotFound, "job not found")

	// A wait that times out answers the job's state then (the duration is
	// what is tested: one second).
	other := e.publish(tok, "ns", "q", "", "other")
	start = time.Now()
	m = lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait?timeout=1"), "", hdr))
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
	require.Equal(t, "waiting", m["state"])
	require.Equal(t, other, m["job_id"])

	requireError(t, do(t, "GET", e.url("/api/ns/q/job/nope/wait?timeout=1"), "", hdr), http.StatusNotFound, "job not found")
	requireError(t, do(t, "GET", e.url("/api/ns/unknown/job/nope/wait?timeout=1"), "", hdr), http.StatusNotFound, "job not found")
	for _, bad := range []string{"-1", "x", "", "1.5", "4294967296"} {
		requireError(t, do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait?timeout="+bad), "", hdr), http.StatusBadRequest, "invalid timeout")
	}
	requireError(t, do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait"), ""), http.StatusUnauthorized, "token not found")
}

// A dead job's wait answers at once: state dead, with its last error.
func TestWaitDeadJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	id := e.publish(tok, "ns", "q", "", "body") // tries=1
	require.Equal(t, id, e.consumeID(tok, "ns", "q"))
	a := do(t, "POST", e.url("/api/ns/q/job/"+id+"/nack"), "boom", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	m := lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id+"/wait?timeout=30"), "", hdr))
	require.Equal(t, "dead", m["state"])
	require.Equal(t, "boom", m["last_error"])
	require.NotEmpty(t, m["finished_at"])
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr), http.StatusNotFound, "job not found")
}

// GET …/job/{id} keeps lmstfy's fields and adds the job's life; without
// retention a cancelled job is gone (404), as an acked one is.
func TestJobJSONLife(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	id := e.publish(tok, "ns", "q", "?ttl=100", "body")
	a := do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr)
	m := lifeJSON(t, a)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"namespace", "queue", "job_id", "data", "ttl", "elapsed_ms", "remain_tries",
		"attributes", "state", "attempts"}, keys, "%s", a.body)
	require.Equal(t, "waiting", m["state"])
	require.EqualValues(t, 0, m["attempts"])
	require.EqualValues(t, 0, m["remain_tries"])

	a = do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	requireError(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr), http.StatusNotFound, "job not found")
	require.Equal(t, 0, e.size("ns", "q"))
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr), http.StatusNotFound, "job not found")
	requireError(t, do(t, "POST", e.url("/api/ns/nosuch/job/x/cancel"), "", hdr), http.StatusNotFound, "job not found")
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/x/cancel"), ""), http.StatusUnauthorized, "token not found")
}

// Progress is stored for a job in flight only: 404 (nothing written) for
// one waiting or unknown, 400 for an empty body, 413 beyond 64 KiB; GET
// …/job shows the latest while its delivery runs.
func TestProgressJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	id := e.publish(tok, "ns", "q", "", "body")
	e.setLifecycle("ns", "q", rmq.Lifecycle{Events: 100})
	progress := "/api/ns/q/job/" + id + "/progress"

	requireError(t, do(t, "PUT", e.url(progress), "early", hdr), http.StatusNotFound, "job not in flight")
	requireError(t, do(t, "PUT", e.url("/api/ns/q/job/nope/progress"), "x", hdr), http.StatusNotFound, "job not in flight")
	requireError(t, do(t, "PUT", e.url("/api/ns/nosuch/job/nope/progress"), "x", hdr), http.StatusNotFound, "job not in flight")
	requireError(t, do(t, "PUT", e.url(progress), "", hdr), http.StatusBadRequest, "invalid body")
	requireError(t, do(t, "PUT", e.url(progress), strings.Repeat("x", 64<<10+1), hdr), http.StatusRequestEntityTooLarge, "body too large")
	requireError(t, do(t, "PUT", e.url(progress), "x"), http.StatusUnauthorized, "token not found")
	// Nothing was written: no progress shown, no event recorded.
	m := lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr))
	require.NotContains(t, m, "progress")
	s, _ := e.openEvents("/api/ns/q/events?after=0", hdr)

	require.Equal(t, id, e.consumeID(tok, "ns", "q"))
	a := do(t, "PUT", e.url(progress), "1/3", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	a = do(t, "PUT", e.url(progress), "2/3", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	m = lifeJSON(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", hdr))
	require.Equal(t, "in_flight", m["state"])
	require.Equal(t, b64("2/3"), m["progress"])
	f := s.nextEvent("progress")
	var ev struct {
		JobID string `json:"job_id"`
		Data  []byte `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
	require.Equal(t, id, ev.JobID)
	require.Equal(t, "1/3", string(ev.Data), "the first progress event is the first stored: the refused ones left none")

	// Acked: no longer in flight.
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+id), "", hdr).status)
	requireError(t, do(t, "PUT", e.url(progress), "3/3", hdr), http.StatusNotFound, "job not in flight")
}
