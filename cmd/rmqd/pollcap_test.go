package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// A token could hold any number of long polls, each watching up to 100
// queues that do not exist yet (2,000 such polls took 540 MB and an
// HMGET of 200,000 fields every 200 ms). Long polls and the unknown
// names they watch are bounded per token (and per process) now: 429
// beyond, other tokens unaffected, and room again when polls end.
func TestBinaryLongPollCaps(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)},
		"--max-long-polls-per-token", "2", "--max-watched-queues-per-token", "3")
	tok, other := newTokenOn(t, p.admin, "ns"), newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	p.publishOn(t, tok) // ns/q exists
	a := do(t, "GET", p.api+"/api/ns/q?ttr=60", "", hdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)

	// Two polls wait on the empty queue; a third is refused. A probe may
	// take a place before the second poll does (it is then refused, and
	// started again): no signal says when a poll waits.
	done := make(chan answer, 2)
	poll := func() { done <- do(t, "GET", p.api+"/api/ns/q?timeout=30&ttr=60", "", hdr) }
	for range 2 {
		go poll()
	}
	deadline := time.Now().Add(waitLong)
	for {
		select {
		case a := <-done:
			require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a)
			restartUntilWaiting(t, done, poll)
			continue
		default:
		}
		a := do(t, "GET", p.api+"/api/ns/q?timeout=1", "", hdr)
		if a.status == http.StatusTooManyRequests {
			require.JSONEq(t, `{"msg":"too many long polls, please retry later"}`, string(a.body))
			break
		}
		require.Equal(t, http.StatusNotFound, a.status, "%s", a) // the two were not waiting yet
		require.True(t, time.Now().Before(deadline), "the third poll was never refused")
	}
	require.Len(t, done, 0)
	require.Equal(t, http.StatusNotFound, do(t, "GET", p.api+"/api/ns/q", "", hdr).status, "a consume without timeout is no long poll")
	require.Equal(t, http.StatusNotFound, do(t, "GET", p.api+"/api/ns/q?timeout=1", "", "X-Token: "+other).status, "another token")
	p.publishOn(t, tok)
	p.publishOn(t, tok)
	for range 2 {
		a := <-done
		require.Equal(t, http.StatusOK, a.status, "%s", a)
	}
	require.Equal(t, http.StatusNotFound, do(t, "GET", p.api+"/api/ns/q?timeout=1", "", hdr).status, "room again")

	// Names of queues that do not exist: at most 3 watched by the token.
	a = do(t, "GET", p.api+"/api/ns/n1,n2,n3,n4?timeout=30", "", hdr)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a)
	require.JSONEq(t, `{"msg":"too many queues that do not exist yet watched by long polls, please retry later"}`, string(a.body))
	watcher := func() { done <- do(t, "GET", p.api+"/api/ns/n1,n2,q?timeout=30&ttr=60", "", hdr) }
	go watcher()
	for {
		select {
		case a := <-done: // the probe took the names first
			require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a)
			restartUntilWaiting(t, done, watcher)
			continue
		default:
		}
		a := do(t, "GET", p.api+"/api/ns/n3,n4?timeout=1", "", hdr)
		if a.status == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusNotFound, a.status, "%s", a)
		require.True(t, time.Now().Before(deadline), "never refused")
	}
	a = do(t, "PUT", p.api+"/api/ns/n2", "new", hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = <-done
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var j encode.JobBody
	a.json(t, &j)
	require.Equal(t, "n2", j.Queue)
}

// restartUntilWaiting starts again a long poll that was refused, until one
// is not refused within 200 ms: a refusal answers at once, so that one
// waits, and the caller's probe may go (probing at once would take the
// place the poll came back for, again and again).
func restartUntilWaiting(t *testing.T, done <-chan answer, start func()) {
	t.Helper()
	for {
		go start()
		select {
		case a := <-done:
			require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a)
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}
