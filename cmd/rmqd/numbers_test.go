package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
)

// Numbers too large for the library (a ttl beyond ~100 years) answered
// 500. Every parameter out of range answers 400 now, and nothing is
// published.
func TestBinaryHugeNumbersAre400(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	for _, c := range []struct{ query, text string }{
		{"?ttl=4294967295", params.ErrTTLTooLong},
		{"?ttl=3153600001", params.ErrTTLTooLong},
	} {
		for _, route := range []string{"/api/ns/q", "/api/ns/qb/bulk", "/api/ns/q/schedule/s?spec=@hourly&"} {
			body := "x"
			if route == "/api/ns/qb/bulk" {
				body = `[{"a":1}]`
			}
			if strings.HasSuffix(route, "&") {
				c.query = c.query[1:]
			}
			a := do(t, "PUT", p.api+route+c.query, body, hdr)
			requireError(t, a, http.StatusBadRequest, c.text)
		}
	}
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":0}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body))
	require.JSONEq(t, `{"schedules":[]}`, string(do(t, "GET", p.api+"/api/ns/q/schedules", "", hdr).body))
	// The longest ttl the library keeps still works.
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q?ttl=3153600000", "x", hdr).status)
}
