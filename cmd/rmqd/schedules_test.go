package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
)

// The schedule routes over HTTP: set, get, list, the ticks consumed as
// jobs, pause, resume, trigger, remove; tokens checked as for a publish,
// each namespace seeing its own schedules; bad input answered 400.
func TestScheduleRoutes(t *testing.T) {
	e := newEnv(t)
	tok, other := e.token("ns"), e.token("ns2")
	call := func(method, path, body, token string) answer {
		return do(t, method, e.url(path), body, "X-Token: "+token)
	}
	spec := url.QueryEscape("@every 1s")

	before := time.Now()
	a := call("PUT", "/api/ns/q/schedule/beat?spec="+spec+"&tries=2&ttl=60", "tick", tok)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var set struct {
		Msg      string           `json:"msg"`
		Schedule api.ScheduleJSON `json:"schedule"`
	}
	a.json(t, &set)
	assert.Equal(t, "schedule set", set.Msg)
	assert.Equal(t, "beat", set.Schedule.Name)
	assert.Equal(t, "@every 1s", set.Schedule.Spec)
	assert.Equal(t, 2, set.Schedule.Tries)
	assert.Equal(t, int64(60), set.Schedule.TTL)
	next, err := time.Parse(time.RFC3339Nano, set.Schedule.Next)
	require.NoError(t, err)

	// The ticks are jobs of the queue.
	j := e.consumeJob(tok, "/api/ns/q?ttr=30&timeout=10")
	assert.Equal(t, "tick", string(j.Data))
	assert.True(t, strings.HasPrefix(j.JobID, "ns.q.beat@"), j.JobID)
	assert.Equal(t, 1, j.RemainTries, "tries 2, one delivery")
	// The first tick is the first whole second after the set. The answer's
	// next is read after the set: when that tick fired in between, it names
	// the one after.
	tick := (mustAtoi(t, strings.TrimPrefix(j.JobID, "ns.q.beat@")))
	assert.Zero(t, tick%1000, "a whole second")
	assert.Greater(t, tick, before.UnixMilli()-50, "not a tick from before the set")
	assert.LessOrEqual(t, tick, next.UnixMilli(), "the first tick, not a later one")
	assert.GreaterOrEqual(t, tick, next.UnixMilli()-1000, "next is at most one tick on")
	require.Equal(t, http.StatusNoContent, call("DELETE", "/api/ns/q/job/"+url.PathEscape(j.JobID), "", tok).status)

	var got struct {
		Schedule api.ScheduleJSON `json:"schedule"`
	}
	call("GET", "/api/ns/q/schedule/beat", "", tok).json(t, &got)
	assert.Equal(t, "tick", got.Schedule.Data)
	var list struct {
		Schedules []api.ScheduleJSON `json:"schedules"`
	}
	call("GET", "/api/ns/q/schedules", "", tok).json(t, &list)
	require.Len(t, list.Schedules, 1)
	assert.Equal(t, "beat", list.Schedules[0].Name)

	// Another namespace: its token does not reach ns, its own list is empty.
	requireError(t, call("GET", "/api/ns/q/schedule/beat", "", other), http.StatusUnauthorized, "invalid token")
	requireError(t, call("POST", "/api/ns/q/schedule/beat/pause", "", other), http.StatusUnauthorized, "invalid token")
	requireError(t, call("GET", "/api/ns/q/schedules", "", ""), http.StatusUnauthorized, "token not found")
	call("GET", "/api/ns2/q/schedules", "", other).json(t, &list)
	assert.Empty(t, list.Schedules)
	requireError(t, call("GET", "/api/ns2/q/schedule/beat", "", other), http.StatusNotFound, "schedule not found")

	a = call("POST", "/api/ns/q/schedule/beat/pause", "", tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	assert.JSONEq(t, `{"msg":"schedule paused"}`, string(a.body))
	got.Schedule = api.ScheduleJSON{}
	call("GET", "/api/ns/q/schedule/beat", "", tok).json(t, &got)
	assert.True(t, got.Schedule.Paused)
	assert.Empty(t, got.Schedule.Next)
	a = call("POST", "/api/ns/q/schedule/beat/resume", "", tok)
	assert.JSONEq(t, `{"msg":"schedule resumed"}`, string(a.body))
	a = call("POST", "/api/ns/q/schedule/beat/trigger", "", tok)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	assert.True(t, strings.HasPrefix(a.object(t)["job_id"].(string), "ns.q.beat@"))

	require.Equal(t, http.StatusNoContent, call("DELETE", "/api/ns/q/schedule/beat", "", tok).status)
	requireError(t, call("GET", "/api/ns/q/schedule/beat", "", tok), http.StatusNotFound, "schedule not found")
	requireError(t, call("DELETE", "/api/ns/q/schedule/beat", "", tok), http.StatusNotFound, "schedule not found")
	requireError(t, call("POST", "/api/ns/q/schedule/beat/trigger", "", tok), http.StatusNotFound, "schedule not found")

	// Bad input: 400, nothing stored.
	e.publish(tok, "ns", "merged", "?type=rangemerge", "x")
	for _, c := range []struct{ path, body, text string }{
		{"/api/ns/q/schedule/x", "b", "invalid spec"},
		{"/api/ns/q/schedule/x?spec=" + url.QueryEscape("61 * * * *"), "b", ""},
		{"/api/ns/q/schedule/x?spec=" + spec + "&tz=Mars/Base", "b", "invalid tz"},
		{"/api/ns/q/schedule/x?spec=" + spec + "&tries=0", "b", "invalid tries"},
		{"/api/ns/q/schedule/x?spec=" + spec + "&catch_up=-1", "b", "invalid catch_up"},
		{"/api/ns/q/schedule/x?spec=" + spec + "&paused=maybe", "b", "invalid paused"},
		{"/api/ns/q/schedule/x?spec=" + spec, "", "invalid body"},
		{"/api/ns/q/schedule/x?spec=" + spec + "&priority=20", "b", ""},
		{"/api/ns/q/schedule/a.b?spec=" + spec, "b", "schedule name contains forbidden characters"},
		{"/api/ns/q/schedule/" + strings.Repeat("n", 130) + "?spec=" + spec, "b", "schedule name too long"},
		{"/api/ns/merged/schedule/x?spec=" + spec, "b", "range-merge queues take no schedule"},
	} {
		a := call("PUT", c.path, c.body, tok)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", c.path, a)
		if c.text != "" {
			requireError(t, a, http.StatusBadRequest, c.text)
		}
	}
	call("GET", "/api/ns/q/schedules", "", tok).json(t, &list)
	assert.Empty(t, list.Schedules)
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, s)
	return v
}
