package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// SIGTERM ends open event streams and job waits at once: the graceful
// shutdown does not wait for them until its deadline (here 60 s), the
// wait answers the job's state then, and the process exits 0.
func TestBinarySIGTERMEndsEventStreamsAndWaits(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + prefix}, "--shutdown-timeout", "60s")
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	a := do(t, "PUT", p.api+"/api/ns/q", "x", hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	id := a.object(t)["job_id"].(string)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.api+"/api/ns/q/events", nil)
	require.NoError(t, err)
	req.Header.Set("X-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": ok\n", line, "the stream is open")
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, rd)
		ended <- err
	}()

	waited := make(chan answer, 1)
	go func() { waited <- do(t, "GET", p.api+"/api/ns/q/job/"+id+"/wait?timeout=60", "", hdr) }()
	// The wait is under way once it is registered in Redis (the slot's
	// waiters hash).
	rdb := redistest.Client(t, srv)
	require.Eventually(t, func() bool {
		keys, err := rdb.Keys(context.Background(), prefix+":*waiters").Result()
		return err == nil && len(keys) > 0
	}, waitLong, 10*time.Millisecond)

	start := time.Now()
	require.Equal(t, 0, p.stop(t))
	require.Less(t, time.Since(start), 10*time.Second, "shutdown waited for the stream or the wait")
	select {
	case err := <-ended:
		require.NoError(t, err, "the stream ended cleanly")
	case <-time.After(waitLong):
		t.Fatal("the event stream did not end")
	}
	w := <-waited
	require.Equal(t, http.StatusOK, w.status, "%s", w)
	require.True(t, strings.Contains(string(w.body), `"state":"waiting"`), "%s", w.body)
}
