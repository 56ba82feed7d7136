package main

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// Schedules had no bound: a spec firing every second was taken, and a
// namespace could hold any number of them. Now a spec ticking more often
// than --min-schedule-interval answers 400 and a namespace holds at most
// --max-schedules (403 beyond; replacing one of its own is not a new one,
// removing one makes room, other namespaces count their own).
func TestBinaryScheduleQuota(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)},
		"--max-schedules", "3", "--min-schedule-interval", "1m")
	tok, other := newTokenOn(t, p.admin, "ns"), newTokenOn(t, p.admin, "ns2")
	set := func(tok, path, spec string) answer {
		return do(t, "PUT", p.api+path+"?spec="+url.QueryEscape(spec), "body", "X-Token: "+tok)
	}
	for _, spec := range []string{"* * * * * *", "@every 1s", "@every 59s", "*/30 * * * * *"} {
		a := set(tok, "/api/ns/q/schedule/fast", spec)
		requireError(t, a, http.StatusBadRequest, "invalid spec: ticks less than 1m0s apart (--min-schedule-interval)")
	}
	for _, name := range []string{"a", "b", "c"} {
		a := set(tok, "/api/ns/q"+name+"/schedule/"+name, "0,1 * * * *")
		require.Equal(t, http.StatusCreated, a.status, "%s", a)
	}
	requireError(t, set(tok, "/api/ns/q/schedule/d", "@hourly"), http.StatusForbidden,
		"too many schedules in the namespace: at most 3 (--max-schedules)")
	require.Equal(t, http.StatusCreated, set(tok, "/api/ns/qa/schedule/a", "@daily").status, "replacing one")
	require.Equal(t, http.StatusCreated, set(other, "/api/ns2/q/schedule/d", "@hourly").status, "another namespace")
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", p.api+"/api/ns/qb/schedule/b", "", "X-Token: "+tok).status)
	require.Equal(t, http.StatusCreated, set(tok, "/api/ns/q/schedule/d", "@hourly").status, "room again")
	requireError(t, set(tok, "/api/ns/q/schedule/e", "@hourly"), http.StatusForbidden,
		"too many schedules in the namespace: at most 3 (--max-schedules)")
}

// The token's write limit held publishes only: a schedule's trigger, a
// republish and a schedule set went through beyond it. Every write route
// takes a unit now.
func TestBinaryEveryWriteRouteUnderTheWriteLimit(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	a := do(t, "PUT", p.api+"/api/ns/q/schedule/s1?spec=@hourly", "tick", hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "POST", p.admin+"/token/ns/"+tok+"/limit", `{"read":0,"write":2,"interval":3600}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	id := p.publishOn(t, tok)
	p.publishOn(t, tok)
	require.Equal(t, http.StatusTooManyRequests, do(t, "PUT", p.api+"/api/ns/q", "x", hdr).status, "publish")
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/ns/q/schedule/s1/trigger"},
		{"PUT", "/api/ns/q/job/" + id},
		{"PUT", "/api/ns/q/schedule/s2?spec=@hourly"},
		{"POST", "/api/ns/q/schedule/s1/pause"},
	} {
		a := do(t, c.method, p.api+c.path, "x", hdr)
		require.Equal(t, http.StatusTooManyRequests, a.status, "%s %s: %s", c.method, c.path, a)
	}
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":2}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body))
}

// publishOn publishes "x" to ns/q and returns the job id.
func (p *rmqdProc) publishOn(t *testing.T, tok string) string {
	t.Helper()
	a := do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var m map[string]string
	a.json(t, &m)
	return m["job_id"]
}
