package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
)

// Redis gone: 500 JSON naming the request id, which the log line of the
// failure names too; Redis back: rmqd works again without a restart.
func TestRedisDownAnswers500AndRecovers(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	e := newEnvOn(t, srv)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "before")

	require.NoError(t, srv.Kill())
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/ns/q", "x"}, // the token is cached: the publish itself fails
		{"GET", "/api/ns/q/size", ""},
		{"PUT", "/api/ns2/q", "x"}, // an unknown token: its lookup fails
	} {
		a := do(t, c.method, e.url(c.path), c.body, "X-Token: "+tok)
		require.Equal(t, http.StatusInternalServerError, a.status, "%s %s: %s", c.method, c.path, a)
		id := a.header.Get("X-Request-ID")
		require.JSONEq(t, `{"error":"internal error","request_id":"`+id+`"}`, string(a.body))
		require.Contains(t, lastLine(e.log.String(), "request failed"), "request_id="+id)
	}
	a := do(t, "POST", e.admin.URL+"/token/ns?description=x", "")
	require.Equal(t, http.StatusInternalServerError, a.status)

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, srv.Restart(ctx))
	// Nothing was persisted (no AOF): the token is gone with the data.
	tok = e.token("ns")
	e.publish(tok, "ns", "q", "", "after")
	require.Equal(t, 1, e.size("ns", "q"))
}

func TestConsumeChecksInOrder(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	for _, c := range []struct{ path, text string }{
		{"/api/ns/q?ttr=-1&timeout=x", "invalid ttr"},
		{"/api/ns/q?ttr=4294967296", "invalid ttr"},
		{"/api/ns/q?timeout=1.5&count=0", "invalid timeout"},
		{"/api/ns/q?timeout=", "invalid timeout"},
		{"/api/ns/q?count=0", "invalid count"},
		{"/api/ns/q?count=101", "invalid count"},
		{"/api/ns/q?count=-1", "invalid count"},
		{"/api/ns/,?count=1", "invalid queue name(s)"},
		{"/api/ns/,", "invalid queue name(s)"},
		// A forbidden byte is a name rule, checked before the parameters
		// (and the token), as lmstfy's middleware does.
		{"/api/ns/q%2Bx?count=0", "queue name contains forbidden characters"},
		{"/api/ns/q1,q$2?ttr=-1", "queue name contains forbidden characters"},
	} {
		requireError(t, do(t, "GET", e.url(c.path), "", "X-Token: "+tok), http.StatusBadRequest, c.text)
	}
	for _, c := range []struct{ query, text string }{
		{"?delay=-1", "invalid delay"},
		{"?delay=1&delay_ms=1", "invalid delay"},
	} {
		requireError(t, do(t, "POST", e.url("/api/ns/q/job/x/nack"+c.query), "", "X-Token: "+tok), http.StatusBadRequest, c.text)
	}
	requireError(t, do(t, "POST", e.url("/api/ns/q/job/x/nack"), strings.Repeat("e", api.MaxCauseSize+1), "X-Token: "+tok),
		http.StatusRequestEntityTooLarge, "body too large")
	// Unknown queue: no delivery in flight.
	requireError(t, do(t, "POST", e.url("/api/ns/none/job/x/nack"), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
}

func TestMetricsAreTextFormat(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "x")
	do(t, "GET", e.url("/nope"), "")
	a := do(t, "GET", e.admin.URL+"/metrics", "")
	require.Equal(t, http.StatusOK, a.status)
	require.True(t, strings.HasPrefix(a.header.Get("Content-Type"), "text/plain; version=0.0.4"))
	body := string(a.body)
	for _, want := range []string{
		`rmqd_http_requests_total{listener="api",route="PUT /api/{ns}/{q}",code="201"} 1`,
		`rmqd_http_requests_total{listener="api",route="unmatched",code="404"} 1`,
		`rmqd_http_requests_total{listener="admin",route="POST /token/{ns}",code="201"} 1`,
		`rmqd_http_request_duration_seconds_count{listener="api",route="PUT /api/{ns}/{q}"} 1`,
		`rmqd_http_request_duration_seconds_bucket{listener="api",route="PUT /api/{ns}/{q}",le="+Inf"} 1`,
		"rmqd_jobs_published_total 1",
	} {
		require.Contains(t, body, want+"\n")
	}
	// Every sample line is "name{labels} value" or "name value", the
	// value a number.
	sample := regexp.MustCompile(`^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)+\})? [0-9.e+-]+$`)
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(line, "# HELP ") && !strings.HasPrefix(line, "# TYPE ") {
			require.Regexp(t, sample, line)
		}
	}
}
