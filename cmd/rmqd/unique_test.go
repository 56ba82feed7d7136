package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// duplicateText is the 409's error of a refused unique publish.
const duplicateText = "duplicate job: published within unique_for"

// A publish with unique_for is refused with 409, writing nothing, while a
// unique publish of its id came within that one's window: the job waiting,
// in flight, acked. key= names the id as unique_key= does. Publishes
// without the parameters answer as lmstfy's.
func TestPublishUnique(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	pub := func(query string) answer {
		return do(t, "PUT", e.url("/api/ns/q"+query), "body", "X-Token: "+tok)
	}

	require.Equal(t, "order-1", e.publish(tok, "ns", "q", "?unique_key=order-1&unique_for=60", "first"))
	before := e.keyspace()
	requireError(t, pub("?unique_key=order-1&unique_for=60"), http.StatusConflict, duplicateText)
	requireError(t, pub("?key=order-1&unique_for=3600"), http.StatusConflict, duplicateText)
	require.Equal(t, before, e.keyspace(), "a refused publish writes nothing")
	require.Equal(t, 1, e.size("ns", "q"))

	// In flight, then acked: still refused.
	j := e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=0")
	require.Equal(t, "order-1", j.JobID)
	requireError(t, pub("?unique_key=order-1&unique_for=60"), http.StatusConflict, duplicateText)
	a := do(t, "DELETE", e.url("/api/ns/q/job/order-1"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	requireError(t, pub("?unique_key=order-1&unique_for=60"), http.StatusConflict, duplicateText)
	require.Equal(t, 0, e.size("ns", "q"))

	// key= with unique_for, and the same key and unique_key.
	require.Equal(t, "k2", e.publish(tok, "ns", "q", "?key=k2&unique_for=60", "x"))
	requireError(t, pub("?key=k2&unique_key=k2&unique_for=60"), http.StatusConflict, duplicateText)
	// Without unique_for nothing is checked: lmstfy's key merge.
	require.Equal(t, "k2", e.publish(tok, "ns", "q", "?key=k2", "y"))
	require.Equal(t, "order-1", e.publish(tok, "ns", "q", "?key=order-1", "z"))

	for _, c := range []struct{ query, text string }{
		{"?unique_key=u&unique_for=0", "invalid unique_for: 1 to 2592000 (30 days)"},
		{"?unique_key=u&unique_for=-1", "invalid unique_for: 1 to 2592000 (30 days)"},
		{"?unique_key=u&unique_for=x", "invalid unique_for: 1 to 2592000 (30 days)"},
		{"?unique_key=u&unique_for=2592001", "invalid unique_for: 1 to 2592000 (30 days)"},
		{"?unique_key=u&unique_for=", "invalid unique_for: 1 to 2592000 (30 days)"},
		{"?unique_for=60", "invalid unique_for: needs unique_key or key"},
		{"?unique_key=u", "invalid unique_for: unique_key needs it"},
		{"?unique_key=a/b&unique_for=60", "invalid unique_key"},
		{"?unique_key=&unique_for=60", "invalid unique_key"},
		{"?key=a&unique_key=b&unique_for=60", "invalid unique_key"},
	} {
		requireError(t, pub(c.query), http.StatusBadRequest, c.text)
	}
	a = do(t, "PUT", e.url("/api/ns/q/bulk?unique_key=u&unique_for=60"), `["a","b"]`, "X-Token: "+tok)
	requireError(t, a, http.StatusBadRequest, "invalid unique_key")
	a = do(t, "PUT", e.url("/api/ns/q/bulk?unique_for=60"), `["a","b"]`, "X-Token: "+tok)
	requireError(t, a, http.StatusBadRequest, "invalid unique_for: needs unique_key or key")
	a = do(t, "PUT", e.url("/api/ns/q/job/k2?unique_key=k3&unique_for=60"), "r", "X-Token: "+tok)
	requireError(t, a, http.StatusBadRequest, "invalid unique_for: not on republish")
	require.Equal(t, 2, e.size("ns", "q"), "the bad requests wrote nothing, the job to republish is still there")
}

// Two real rmqd processes on one Redis: a unique publish through one and
// its repeat through the other give 201 and 409.
func TestBinaryPublishUnique(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	env := []string{"RMQD_PREFIX=" + prefix}
	p1 := startRmqd(t, "redis://"+srv.Addr()+"/0", env)
	p2 := startRmqd(t, "redis://"+srv.Addr()+"/0", env)

	a := do(t, "POST", p1.admin+"/token/ns?description=bin", "")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var tok map[string]string
	a.json(t, &tok)
	a = do(t, "PUT", p1.api+"/api/ns/q?unique_key=once&unique_for=60", "hello", "X-Token: "+tok["token"])
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"published","job_id":"once"}`, string(a.body))
	a = do(t, "PUT", p2.api+"/api/ns/q?unique_key=once&unique_for=60", "hello", "X-Token: "+tok["token"])
	requireError(t, a, http.StatusConflict, duplicateText)
	require.Equal(t, 0, p1.stop(t))
	require.Equal(t, 0, p2.stop(t))
}
