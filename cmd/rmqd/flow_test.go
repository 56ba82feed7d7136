package main

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// consumeJob consumes one job (count 1) and fails unless one comes.
func (e *env) consumeJob(tok, path string) encode.JobBody {
	e.t.Helper()
	a := do(e.t, "GET", e.url(path), "", "X-Token: "+tok)
	require.Equal(e.t, http.StatusOK, a.status, "%s", a)
	var j encode.JobBody
	a.json(e.t, &j)
	require.Equal(e.t, "new job", j.Msg)
	return j
}

// The lmstfy client flow of issue #12, end to end over HTTP.
func TestLmstfyFlowEndToEnd(t *testing.T) {
	e := newEnv(t)
	a := do(t, "POST", e.admin.URL+"/token/ns1?description=flow", "")
	require.Equal(t, http.StatusCreated, a.status)
	var created map[string]string
	a.json(t, &created)
	tok := created["token"]

	start := time.Now()
	id := e.publish(tok, "ns1", "q1", "?delay=1&tries=2&ttl=60", "hello")
	requireNoJob(t, do(t, "GET", e.url("/api/ns1/q1"), "", "X-Token: "+tok))
	require.Equal(t, 0, e.size("ns1", "q1"), "delayed jobs are not counted")

	// Long poll: the job comes when its delay is over.
	j := e.consumeJob(tok, "/api/ns1/q1?ttr=1&timeout=5")
	require.GreaterOrEqual(t, time.Since(start), 950*time.Millisecond)
	require.Equal(t, id, j.JobID)
	require.Equal(t, "hello", string(j.Data))
	require.Equal(t, 1, j.RemainTries)
	require.InDelta(t, 59, j.TTL, 2)
	require.GreaterOrEqual(t, j.ElapsedMS, int64(950))
	require.Nil(t, j.Attributes)

	// Not acked: after ttr it comes back with one try fewer. The library
	// sweeps expired pull leases every 10 s and retries after its backoff
	// (1 s), so this takes up to ~11 s (lmstfy: ttr ± 1 s).
	j = e.consumeJob(tok, "/api/ns1/q1?ttr=1&timeout=30")
	require.Equal(t, id, j.JobID)
	require.Equal(t, 0, j.RemainTries)

	// Not acked again, no try left: the dead letter.
	require.Eventually(t, func() bool {
		var d struct {
			Size int64  `json:"deadletter_size"`
			Head string `json:"deadletter_head"`
		}
		do(t, "GET", e.url("/api/ns1/q1/deadletter"), "", "X-Token: "+tok).json(t, &d)
		return d.Size == 1 && d.Head == id
	}, 30*time.Second, 50*time.Millisecond)
	// Dead jobs stay peekable by id.
	a = do(t, "GET", e.url("/api/ns1/q1/job/"+id), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)

	a = do(t, "PUT", e.url("/api/ns1/q1/deadletter?limit=10&ttl=30"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"msg":"respawned","count":1}`, string(a.body))
	j = e.consumeJob(tok, "/api/ns1/q1?ttr=30")
	require.Equal(t, id, j.JobID, "a respawned job keeps its id")

	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns1/q1/job/"+id), "", "X-Token: "+tok).status)
	requireError(t, do(t, "GET", e.url("/api/ns1/q1/job/"+id), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
	start = time.Now()
	requireNoJob(t, do(t, "GET", e.url("/api/ns1/q1?timeout=1"), "", "X-Token: "+tok))
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "an acked job never comes back")
}

func requireNoJob(t *testing.T, a answer) {
	t.Helper()
	require.Equal(t, http.StatusNotFound, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"no job available"}`, string(a.body))
}

func TestConsumeShapes(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	for _, b := range []string{"a", "b", "c"} {
		e.publish(tok, "ns", "q1", "", b)
	}
	e.publish(tok, "ns", "q2", "", "first")

	// Several queues: the listed order is a priority.
	j := e.consumeJob(tok, "/api/ns/q2,q1")
	require.Equal(t, "q2", j.Queue)
	require.Equal(t, "first", string(j.Data))

	// count > 1: an array, FIFO, even of one.
	a := do(t, "GET", e.url("/api/ns/q1?count=2"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var js []encode.JobBody
	a.json(t, &js)
	require.Len(t, js, 2)
	require.Equal(t, "a", string(js[0].Data))
	require.Equal(t, "b", string(js[1].Data))
	a = do(t, "GET", e.url("/api/ns/q1?count=5"), "", "X-Token: "+tok)
	a.json(t, &js)
	require.Len(t, js, 1)
	require.Equal(t, "c", string(js[0].Data))
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q1?count=5"), "", "X-Token: "+tok))

	// A long poll wakes as soon as a job arrives in any listed queue.
	got := make(chan answer, 1)
	polls := strings.Count(e.log.String(), "rmqd: long poll")
	go func() { got <- do(t, "GET", e.url("/api/ns/q3,q4?timeout=20"), "", "X-Token: "+tok) }()
	// The consume logs its long poll once it waits.
	require.Eventually(t, func() bool { return strings.Count(e.log.String(), "rmqd: long poll") == polls+1 }, waitLong, time.Millisecond)
	start := time.Now()
	e.publish(tok, "ns", "q4", "", "wake")
	a = <-got
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Less(t, time.Since(start), 2*time.Second)
	var w encode.JobBody
	a.json(t, &w)
	require.Equal(t, "q4", w.Queue)

	// Attributes (version mode) and an empty body round-trip.
	id := e.publish(tok, "ns", "q5", "?tries=3", "", "Enable-Job-Version: YES", "Job-Attr-Color: red", "Job-Attr-Empty: ")
	var peek encode.JobBody
	do(t, "GET", e.url("/api/ns/q5/peek"), "", "X-Token: "+tok).json(t, &peek)
	require.Equal(t, id, peek.JobID)
	require.Equal(t, 3, peek.RemainTries, "the head's tries before its next delivery")
	j = e.consumeJob(tok, "/api/ns/q5")
	require.Equal(t, map[string]string{"color": "red"}, j.Attributes)
	require.Equal(t, "", base64.StdEncoding.EncodeToString(j.Data))
	require.Equal(t, 2, j.RemainTries)
	a = do(t, "GET", e.url("/api/ns/q5/job/"+id), "", "X-Token: "+tok)
	require.Contains(t, string(a.body), `"data":""`)
	require.Contains(t, string(a.body), `"remain_tries":0`)

	// Republish: the old job is gone, a new id answers.
	newID := e.publish(tok, "ns", "q5/job/"+id, "?delay=3600", "again")
	require.NotEqual(t, id, newID)
	requireError(t, do(t, "GET", e.url("/api/ns/q5/job/"+id), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
	a = do(t, "GET", e.url("/api/ns/q5/job/"+newID), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "a delayed job is peekable by id")
}
