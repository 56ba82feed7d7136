package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
)

// A republish with bad parameters deleted the job, then answered 400: the
// job was lost. Every check that can come first does now; the job stays.
func TestBinaryBadRepublishKeepsTheJob(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	id := p.publishOn(t, tok)
	for _, c := range []struct {
		query, body string
		status      int
	}{
		{"?tries=0", "x", http.StatusBadRequest},
		{"?ttl=abc", "x", http.StatusBadRequest},
		{"?delay=10&ttl=5", "x", http.StatusBadRequest},
		{"?priority=100", "x", http.StatusBadRequest}, // a fixed-time queue takes none
		{"?type=priority&priority=100", "x", http.StatusConflict},
		{"", strings.Repeat("x", params.MaxJobSize+1), http.StatusRequestEntityTooLarge},
	} {
		a := do(t, "PUT", p.api+"/api/ns/q/job/"+id+c.query, c.body, hdr)
		require.Equal(t, c.status, a.status, "%s: %s", c.query, a)
		require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body), "%s: the job kept", c.query)
	}
	a := do(t, "GET", p.api+"/api/ns/q/job/"+id, "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	a = do(t, "PUT", p.api+"/api/ns/q/job/"+id+"?tries=2", "new", hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	require.Equal(t, http.StatusNotFound, do(t, "GET", p.api+"/api/ns/q/job/"+id, "", hdr).status, "the old job went")
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body))
}
