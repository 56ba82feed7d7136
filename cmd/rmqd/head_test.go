package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// HEAD on the consume route took a job and spent its try while answering
// no body. It answers 405 now (Allow: GET) and the job stays ready.
func TestBinaryHeadDoesNotConsume(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "x", hdr).status)
	for _, u := range []string{"/api/ns/q?ttr=1", "/api/ns/q,q2?ttr=1&timeout=1"} {
		a := do(t, "HEAD", p.api+u, "", hdr)
		require.Equal(t, http.StatusMethodNotAllowed, a.status, "%s", u)
		require.Equal(t, "GET", a.header.Get("Allow"))
	}
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body), "nothing leased")
	// HEAD on a read-only route still answers like GET.
	require.Equal(t, http.StatusOK, do(t, "HEAD", p.api+"/api/ns/q/size", "").status)
	a := do(t, "GET", p.api+"/api/ns/q?ttr=1", "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var j encode.JobBody
	a.json(t, &j)
	require.Equal(t, 0, j.RemainTries, "the first delivery: the HEADs took none")
	require.Equal(t, http.StatusNotFound, do(t, "GET", p.api+"/api/ns/q", "", hdr).status)
}
