package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The explicit nack: 204 ends the delivery as failed, and the job comes back
// no earlier than the delay with one try fewer; 404 when no delivery of the
// job is in flight; the last try nacked puts it in the dead letter.
func TestNackJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	id := e.publish(tok, "ns", "q", "?tries=2", "pay")
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/"+id+"/nack"), "", "X-Token: "+tok), http.StatusNotFound, "job not found")

	j := e.consumeJob(tok, "/api/ns/q?ttr=30")
	require.Equal(t, id, j.JobID)
	require.Equal(t, 1, j.RemainTries)
	// Taken before the request: the delay starts when Redis runs the
	// rollback, before the answer arrives.
	nacked := time.Now()
	a := do(t, "POST", e.url("/api/ns/q/job/"+id+"/nack?delay_ms=300"), "payment service down", "X-Token: "+tok)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/"+id+"/nack"), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/unknown/nack"), "", "X-Token: "+tok), http.StatusNotFound, "job not found")

	j = e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=5")
	require.GreaterOrEqual(t, time.Since(nacked), 300*time.Millisecond)
	require.Equal(t, id, j.JobID)
	require.Equal(t, 0, j.RemainTries)

	// No try left: dead at once, whatever the delay.
	a = do(t, "POST", e.url("/api/ns/q/job/"+id+"/nack?delay=60"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	var d struct {
		Size int64  `json:"deadletter_size"`
		Head string `json:"deadletter_head"`
	}
	do(t, "GET", e.url("/api/ns/q/deadletter"), "", "X-Token: "+tok).json(t, &d)
	require.Equal(t, int64(1), d.Size)
	require.Equal(t, id, d.Head)
}
