package main

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
)

// A limit of interval 2^63-1 was accepted, then not enforced (the period
// overflowed). Numbers beyond the bounds answer 400 now; the largest
// accepted are enforced.
func TestBinaryLimitNumbersBounded(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	lim := p.admin + "/token/ns/" + tok + "/limit"
	for _, body := range []string{
		`{"read":0,"write":1,"interval":9223372036854775807}`,
		`{"read":0,"write":1,"interval":31536001}`,
		`{"read":9223372036854775807,"write":1,"interval":60}`,
		`{"read":0,"write":2147483648,"interval":60}`,
	} {
		requireError(t, do(t, "POST", lim, body), http.StatusBadRequest, admin.ErrLimitTooLarge)
		requireError(t, do(t, "PUT", lim, body), http.StatusBadRequest, admin.ErrLimitTooLarge)
	}
	a := do(t, "POST", lim, `{"read":0,"write":1,"interval":`+strconv.Itoa(admin.MaxLimitInterval)+`}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	p.publishOn(t, tok)
	require.Equal(t, http.StatusTooManyRequests, do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok).status)
}
