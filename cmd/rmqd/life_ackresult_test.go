package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// An HTTP worker stores its job's result with its ack: the body of
// DELETE …/job/{id} (which lmstfy ignores) is the result of the delivery
// it acks, answered by a wait under way and kept, with retention, in the
// job's JSON. A body over consumer.MaxResultSize is 413 with the
// contract's error shape and acks nothing; an ack without a body (lmstfy's)
// completes the job without a result. Against a real rmqd process.
func TestBinaryAckStoresResult(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	publish := func(body string) string {
		a := do(t, "PUT", p.api+"/api/ns/q", body, hdr)
		require.Equal(t, http.StatusCreated, a.status, "%s", a)
		return a.object(t)["job_id"].(string)
	}
	consume := func(want string) {
		a := do(t, "GET", p.api+"/api/ns/q?ttr=600", "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		require.Equal(t, want, a.object(t)["job_id"])
	}
	job := func(id string) map[string]any {
		a := do(t, "GET", p.api+"/api/ns/q/job/"+id, "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		return a.object(t)
	}
	first := publish("one")
	a := do(t, "PUT", p.admin+"/queue/ns/q/lifecycle", `{"retention_ms":60000,"events":100}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	consume(first)

	waited := make(chan answer, 1)
	go func() { waited <- do(t, "GET", p.api+"/api/ns/q/job/"+first+"/wait?timeout=60", "", hdr) }()

	big := do(t, "DELETE", p.api+"/api/ns/q/job/"+first, strings.Repeat("x", consumer.MaxResultSize+1), hdr)
	requireError(t, big, http.StatusRequestEntityTooLarge, "body too large")
	assert.Equal(t, "in_flight", job(first)["state"], "a refused ack acks nothing")

	a = do(t, "DELETE", p.api+"/api/ns/q/job/"+first, "3 thumbnails", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	w := lifeJSON(t, <-waited)
	assert.Equal(t, "completed", w["state"])
	assert.Equal(t, b64("3 thumbnails"), w["result"])
	j := job(first)
	assert.Equal(t, "completed", j["state"])
	assert.Equal(t, b64("3 thumbnails"), j["result"])
	assert.Equal(t, b64("one"), j["data"])

	second := publish("two")
	consume(second)
	a = do(t, "DELETE", p.api+"/api/ns/q/job/"+second, "", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	j = job(second)
	assert.Equal(t, "completed", j["state"])
	assert.NotContains(t, j, "result")
}
