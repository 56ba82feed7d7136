package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// DELETE /api/NS/Q read the ready jobs with their bodies, 500 at a time,
// to remove them: 400 jobs of 1 MiB took rmqd from 178 to 440 MB. It
// reads ids only now: Redis sends next to nothing but the ids, and the
// ready jobs go while the delayed ones stay.
func TestBinaryDestroyReadsNoBodies(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	body := strings.Repeat("b", 1<<20)
	for range 30 {
		require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", body, hdr).status)
	}
	for range 3 {
		require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q?delay=3600", "later", hdr).status)
	}
	before := netOut(t, rdb)
	a := do(t, "DELETE", p.api+"/api/ns/q", "", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	sent := netOut(t, rdb) - before
	t.Logf("Redis sent %d bytes to destroy 30 jobs of 1 MiB", sent)
	require.Less(t, sent, int64(256<<10))
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":0}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body))
	a = do(t, "GET", p.admin+"/queue/ns/q", "")
	require.Contains(t, string(a.body), `"delayed":3`, "%s", a)
}
