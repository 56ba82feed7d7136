package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// docs/operations.md says every program takes a bare HOST:PORT for Redis;
// rmqd refused one. It serves on one now, for the default pool and a
// named one.
func TestBinaryBareRedisAddress(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, srv.Addr(), []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--pool", "other="+srv.Addr())
	tok := newTokenOn(t, p.admin, "ns")
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok).status)
	a := do(t, "GET", p.api+"/api/ns/q", "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	a = do(t, "POST", p.admin+"/token/ns?description=x&pool=other", "")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
}
