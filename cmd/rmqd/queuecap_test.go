package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// One token made 5,000 queues in 7.6 s, after which the dashboard's
// overview took 2.4 MB and 2.7 s. A token creates at most
// --max-queues-per-token queues now (403 beyond); queues that exist, made
// by anyone, cost nothing.
func TestBinaryQueuesPerToken(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--max-queues-per-token", "3")
	tok, other := newTokenOn(t, p.admin, "ns"), newTokenOn(t, p.admin, "ns")
	put := func(tok, path, body string) answer { return do(t, "PUT", p.api+path, body, "X-Token: "+tok) }
	const refused = "too many queues created by this token: at most 3 (--max-queues-per-token)"
	for _, q := range []string{"q1", "q2", "q3", "q1"} {
		require.Equal(t, http.StatusCreated, put(tok, "/api/ns/"+q, "x").status, q)
	}
	requireError(t, put(tok, "/api/ns/q4", "x"), http.StatusForbidden, refused)
	requireError(t, put(tok, "/api/ns/q4/bulk", `["x"]`), http.StatusForbidden, refused)
	requireError(t, put(tok, "/api/ns/q4/schedule/s?spec=@hourly", "x"), http.StatusForbidden, refused)
	require.Equal(t, http.StatusCreated, put(other, "/api/ns/q4", "x").status, "another token's own count")
	require.Equal(t, http.StatusCreated, put(tok, "/api/ns/q4", "x").status, "q4 exists now")
	require.Equal(t, http.StatusCreated, put(tok, "/api/ns/q2/bulk", `["x"]`).status)
}
