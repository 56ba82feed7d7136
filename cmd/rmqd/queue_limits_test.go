package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A queue's flow limits through the admin API: set, shown and removed;
// invalid ones refused with 400 and nothing stored; a publish's ?group=
// checked. With one place per group, a consume gets each group's next job
// only once the one before was acked (DELETE …/job/{id}), in order; with a
// concurrency of 1, one job at a time.
func TestQueueLimitsAndGroups(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	limits := e.admin.URL + "/queue/ns/q/limits"
	requireError(t, do(t, "GET", limits, ""), http.StatusNotFound, "queue not found")

	var ids []string
	for _, g := range []string{"g1", "g1", "g2", "g1", "g2"} {
		ids = append(ids, e.publish(tok, "ns", "q", "?group="+g, "job of "+g))
	}
	a := do(t, "PUT", e.url("/api/ns/q?group=a%20b"), "x", "X-Token: "+tok)
	requireError(t, a, http.StatusBadRequest, "invalid group")

	a = do(t, "GET", limits, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	assert.JSONEq(t, `{"rate":0,"interval_ms":0,"concurrency":0,"group_concurrency":0,"group_rate":0,"group_interval_ms":0}`, string(a.body))
	for _, bad := range []string{`{"rate":5}`, `{"rate":-1,"interval_ms":1000}`, `{"concurrency":-2}`, `not json`, `{"group_rate":1,"group_interval_ms":90000000}`} {
		a = do(t, "PUT", limits, bad)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", bad, a)
	}
	a = do(t, "PUT", limits, `{"group_concurrency":1}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	assert.JSONEq(t, `{"rate":0,"interval_ms":0,"concurrency":0,"group_concurrency":1,"group_rate":0,"group_interval_ms":0}`, string(a.body))

	// One place per group: the heads of g1 and g2, then nothing.
	first := e.consumeJob(tok, "/api/ns/q?ttr=30")
	second := e.consumeJob(tok, "/api/ns/q?ttr=30")
	assert.ElementsMatch(t, []string{ids[0], ids[2]}, []string{first.JobID, second.JobID})
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q?ttr=30"), "", "X-Token: "+tok))
	// Acking g1's head lets g1's next go.
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+ids[0]), "", "X-Token: "+tok).status)
	next := e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=5")
	assert.Equal(t, ids[1], next.JobID)

	// Concurrency 1 for the whole queue: g2's head and g1's second are in
	// flight, so nothing more until both are acked.
	a = do(t, "PUT", limits, `{"concurrency":1}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+ids[2]), "", "X-Token: "+tok).status)
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q?ttr=30"), "", "X-Token: "+tok))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+ids[1]), "", "X-Token: "+tok).status)
	one := e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=5")
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q?ttr=30"), "", "X-Token: "+tok))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+one.JobID), "", "X-Token: "+tok).status)
	e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=5")

	require.Equal(t, http.StatusNoContent, do(t, "DELETE", limits, "").status)
	a = do(t, "GET", limits, "")
	assert.JSONEq(t, `{"rate":0,"interval_ms":0,"concurrency":0,"group_concurrency":0,"group_rate":0,"group_interval_ms":0}`, string(a.body))
}
