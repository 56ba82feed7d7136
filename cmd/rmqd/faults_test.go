package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// The fault figures of a probe of rmqd, as tests: every publish rmqd
// acknowledged (201) is delivered through a kill -9 of Redis (with its
// AOF fsynced on every write) and through a SIGTERM of rmqd, both under
// load.

// publishLoad publishes distinct bodies from several goroutines until
// halted, remembering which were acknowledged.
type publishLoad struct {
	mu      sync.Mutex
	acked   map[string]bool
	failed  int
	changed chan struct{} // closed and replaced at each result
	// While the server is away one worker probes it and the others wait
	// for its first success: a retry loop, not a spin of every worker.
	probing bool
	back    chan struct{} // closed and replaced at the prober's success

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startPublishLoad(t *testing.T, url, tok string, workers int) *publishLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &publishLoad{acked: map[string]bool{}, changed: make(chan struct{}), back: make(chan struct{}), cancel: cancel}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			prober := false
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("w%d-%d", w, i)
				req, _ := http.NewRequestWithContext(ctx, "PUT", url, strings.NewReader(body))
				req.Header.Set("X-Token", tok)
				resp, err := hc.Do(req)
				ok := false
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					ok = resp.StatusCode == http.StatusCreated
				}
				if ctx.Err() != nil && !ok {
					return // halted: not a failure of the server
				}
				l.mu.Lock()
				if ok {
					l.acked[body] = true
				} else {
					l.failed++
				}
				close(l.changed)
				l.changed = make(chan struct{})
				wait := (chan struct{})(nil)
				switch {
				case ok && prober:
					prober, l.probing = false, false
					close(l.back)
					l.back = make(chan struct{})
				case !ok && !prober && l.probing:
					wait = l.back
				case !ok && !prober:
					prober, l.probing = true, true
				}
				l.mu.Unlock()
				if wait != nil {
					select {
					case <-wait:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

// waitFor waits until cond holds of (acked, failed).
func (l *publishLoad) waitFor(t *testing.T, what string, cond func(acked, failed int) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		ok, ch := cond(len(l.acked), l.failed), l.changed
		acked, failed := len(l.acked), l.failed
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("load: %s not reached (acked %d, failed %d)", what, acked, failed)
		}
	}
}

func (l *publishLoad) halt() {
	l.cancel()
	l.wg.Wait()
}

// drain consumes every ready job of ns/q through api and counts bodies.
func drain(t *testing.T, api, tok, ns, q string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for {
		a := do(t, "GET", api+"/api/"+ns+"/"+q+"?count=100&ttr=600", "", "X-Token: "+tok)
		if a.status == http.StatusNotFound {
			return got
		}
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var jobs []encode.JobBody
		require.NoError(t, json.Unmarshal(a.body, &jobs))
		for _, j := range jobs {
			got[string(j.Data)]++
		}
	}
}

// requireNoneLost checks that every acknowledged body was consumed.
func requireNoneLost(t *testing.T, l *publishLoad, got map[string]int) {
	t.Helper()
	lost := 0
	for body := range l.acked {
		if got[body] == 0 {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged publish %q was lost", body)
			}
		}
	}
	t.Logf("acknowledged %d, failed %d, delivered %d distinct (%d published but not acknowledged), lost %d",
		len(l.acked), l.failed, len(got), len(got)-len(l.acked)+lost, lost)
	require.Zero(t, lost)
}

func TestBinaryNoAcknowledgedPublishLostThroughRedisKill(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--access-log=false")
	tok := newTokenOn(t, p.admin, "ns")
	l := startPublishLoad(t, p.api+"/api/ns/q", tok, 8)
	l.waitFor(t, "1,000 acknowledged", func(acked, _ int) bool { return acked >= 1000 })
	require.NoError(t, srv.Kill()) // SIGKILL: no shutdown, no last write
	l.waitFor(t, "publishes failing", func(_, failed int) bool { return failed >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, srv.Restart(ctx))
	var before int
	l.waitFor(t, "publishes after the restart", func(acked, _ int) bool {
		if before == 0 {
			before = acked
		}
		return acked >= before+1000
	})
	l.halt()
	requireNoneLost(t, l, drain(t, p.api, tok, "ns", "q"))
}

func TestBinaryNoAcknowledgedPublishLostThroughSIGTERM(t *testing.T) {
	srv := redistest.Shared(t)
	url := "redis://" + srv.Addr() + "/0"
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t), "RMQD_ACCESS_LOG=false"}
	p := startRmqd(t, url, env)
	tok := newTokenOn(t, p.admin, "ns")
	l := startPublishLoad(t, p.api+"/api/ns/q", tok, 8)
	l.waitFor(t, "2,000 acknowledged", func(acked, _ int) bool { return acked >= 2000 })
	require.Equal(t, 0, p.stop(t), "a clean exit under load")
	l.waitFor(t, "publishes refused after the exit", func(_, failed int) bool { return failed >= 8 })
	l.halt()
	q := startRmqd(t, url, env)
	requireNoneLost(t, l, drain(t, q.api, tok, "ns", "q"))
}
