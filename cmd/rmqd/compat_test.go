package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// lmstfy reports a job's ttl as Redis's TTL of its data: the milliseconds
// left rounded to the nearest second.
func TestTTLSecondsRoundLikeRedis(t *testing.T) {
	for _, c := range []struct {
		left time.Duration
		want int64
	}{
		{10 * time.Second, 10}, {9500 * time.Millisecond, 10}, {9499 * time.Millisecond, 9},
		{1500 * time.Millisecond, 2}, {500 * time.Millisecond, 1}, {499 * time.Millisecond, 0},
		{0, 0}, {-3 * time.Second, 0},
	} {
		require.Equal(t, c.want, pull.TTLSeconds(c.left), "%v", c.left)
	}
}

// A job consumed at once after its publish says the ttl it was published
// with (lmstfy: 10 after ttl=10), not one second less.
func TestConsumeReportsTTLRounded(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "?ttl=10", "x")
	j := e.consumeJob(tok, "/api/ns/q?ttr=30")
	require.EqualValues(t, 10, j.TTL)
	e.publish(tok, "ns", "q", "?ttl=0", "y")
	j = e.consumeJob(tok, "/api/ns/q?ttr=30")
	require.EqualValues(t, 0, j.TTL, "ttl 0: never expires")
}

// Once a job's ttl ran out its data is gone, as lmstfy's expiring key is:
// peek by id answers 404, a peek of the queue shows the head with data
// null (size still counts it, as lmstfy's list entry), consume skips it.
func TestExpiredJobIsGone(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	published := time.Now()
	id := e.publish(tok, "ns", "q", "?ttl=1&tries=2", "x")
	a := do(t, "GET", e.url("/api/ns/q/job/"+id), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	// Polled until the job is gone; a look that starts once its ttl ran
	// out (with a margin for rounding) must find it gone.
	expired := published.Add(1100 * time.Millisecond)
	redistest.Poll(t, func() error {
		start := time.Now()
		a := do(t, "GET", e.url("/api/ns/q/job/"+id), "", "X-Token: "+tok)
		if a.status == http.StatusNotFound {
			return nil
		}
		require.True(t, start.Before(expired), "the job outlived its ttl: %s", a)
		return fmt.Errorf("not expired yet: %s", a)
	})

	requireError(t, do(t, "GET", e.url("/api/ns/q/job/"+id), "", "X-Token: "+tok), http.StatusNotFound, "job not found")
	a = do(t, "GET", e.url("/api/ns/q/peek"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	m := a.object(t)
	require.Equal(t, id, m["job_id"])
	require.Nil(t, m["data"])
	require.EqualValues(t, 0, m["ttl"])
	require.EqualValues(t, 0, m["remain_tries"])
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q"), "", "X-Token: "+tok))
	requireError(t, do(t, "GET", e.url("/api/ns/q/peek"), "", "X-Token: "+tok), http.StatusNotFound, "the queue is empty")
}

// killJob consumes the job at the head of ns/q and nacks it until it is
// dead; it returns the job's id.
func (e *env) killJob(tok, ns, q string) string {
	e.t.Helper()
	for {
		j := e.consumeJob(tok, "/api/"+ns+"/"+q+"?ttr=30&timeout=5")
		a := do(e.t, "POST", e.url("/api/"+ns+"/"+q+"/job/"+j.JobID+"/nack?delay_ms=1"), "", "X-Token: "+tok)
		require.Equal(e.t, http.StatusNoContent, a.status, "%s", a)
		if j.RemainTries == 0 {
			return j.JobID
		}
	}
}

// Dead jobs never expire and show ttl 0 (lmstfy persists a job's data when
// it dies); a respawned job has one try and the respawn's ttl (0: none),
// whatever it had before.
func TestDeadJobsKeepNoTTLAndRespawnRenews(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "?ttl=1&tries=3", "three")
	a := e.killJob(tok, "ns", "q")
	e.publish(tok, "ns", "q", "?ttl=1&tries=1", "one")
	b := e.killJob(tok, "ns", "q")
	// A live job with the same ttl, published after both: once it expired,
	// so would they have, had they kept their ttl.
	w := e.publish(tok, "ns", "w", "?ttl=1", "witness")
	redistest.Poll(t, func() error {
		if a := do(t, "GET", e.url("/api/ns/w/job/"+w), "", "X-Token: "+tok); a.status != http.StatusNotFound {
			return fmt.Errorf("the witness did not expire yet: %s", a)
		}
		return nil
	})

	for _, id := range []string{a, b} {
		a := do(t, "GET", e.url("/api/ns/q/job/"+id), "", "X-Token: "+tok)
		require.Equal(t, http.StatusOK, a.status, "a dead job does not expire: %s", a)
		var j encode.JobBody
		a.json(t, &j)
		require.EqualValues(t, 0, j.TTL, "dead: ttl 0")
		require.EqualValues(t, 0, j.RemainTries)
	}

	r := do(t, "PUT", e.url("/api/ns/q/deadletter?limit=10&ttl=30"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"msg":"respawned","count":2}`, string(r.body))
	p := do(t, "GET", e.url("/api/ns/q/job/"+a), "", "X-Token: "+tok)
	var pj encode.JobBody
	p.json(t, &pj)
	require.EqualValues(t, 30, pj.TTL, "the respawn's ttl, from now")
	seen := map[string]bool{}
	for range 2 {
		j := e.consumeJob(tok, "/api/ns/q?ttr=30")
		seen[j.JobID] = true
		require.Equal(t, 0, j.RemainTries, "one try")
		require.EqualValues(t, 30, j.TTL)
		// Its one try used: a nack kills it again.
		require.Equal(t, http.StatusNoContent, do(t, "POST", e.url("/api/ns/q/job/"+j.JobID+"/nack"), "", "X-Token: "+tok).status)
	}
	require.Equal(t, map[string]bool{a: true, b: true}, seen)

	r = do(t, "PUT", e.url("/api/ns/q/deadletter?limit=%2B10&ttl=0"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"msg":"respawned","count":2}`, string(r.body), "limit and ttl are read as lmstfy's ParseInt reads them")
	for range 2 {
		j := e.consumeJob(tok, "/api/ns/q?ttr=30")
		require.EqualValues(t, 0, j.TTL, "ttl=0: never expires")
		require.Equal(t, 0, j.RemainTries)
	}
	// Any int64 goes, as in lmstfy.
	r = do(t, "PUT", e.url("/api/ns/q/deadletter?limit=99999999999&ttl=99999999999"), "", "X-Token: "+tok)
	require.JSONEq(t, `{"msg":"respawned","count":0}`, string(r.body))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/deadletter?limit=99999999999"), "", "X-Token: "+tok).status)
}

// A consume naming a queue with a forbidden byte fails the name rule, as
// lmstfy's middleware does: before the token and the parameters.
func TestMultiConsumeNameRule(t *testing.T) {
	e := newEnv(t)
	requireError(t, do(t, "GET", e.url("/api/ns/q1,q$2"), ""), http.StatusBadRequest, "queue name contains forbidden characters")
	requireError(t, do(t, "GET", e.url("/api/ns/q1,q.2?count=0"), "", "X-Token: nope"), http.StatusBadRequest, "queue name contains forbidden characters")
	requireError(t, do(t, "GET", e.url("/api/ns/,,"), ""), http.StatusUnauthorized, "token not found")
}
