package main

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lateness reads the dashboard's firing-lateness histogram (counts per
// bucket, ≤ 1 ms first).
func (e *env) lateness() []int {
	e.t.Helper()
	a := do(e.t, "GET", e.admin.URL+"/dashboard/", "")
	require.Equal(e.t, http.StatusOK, a.status, "%s", a)
	page := string(a.body)
	i := strings.Index(page, `id="lateness"`)
	require.GreaterOrEqual(e.t, i, 0)
	var out []int
	for _, m := range regexp.MustCompile(`<span class="cnt">(\d+)</span>`).FindAllStringSubmatch(page[i:], -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// The dashboard's firing lateness counts jobs that came due while a
// consume waited for them, by how late rmqd had them: not jobs a consume
// found waiting (their lateness would be the consumer's, 1 s and more for
// an undelayed job stored as due a second early).
func TestDashboardLatenessCountsFirings(t *testing.T) {
	e := newEnv(t, withDashboard)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "backlog")
	e.consumeJob(tok, "/api/ns/q?ttr=30")
	require.Zero(t, sum(e.lateness()), "a job found waiting is no firing")

	got := make(chan answer, 1)
	poll := func(n int) {
		go func() { got <- do(t, "GET", e.url("/api/ns/q?timeout=10&ttr=30"), "", "X-Token: "+tok) }()
		// The consume logs its long poll once it is under way.
		require.Eventually(t, func() bool { return strings.Count(e.log.String(), "rmqd: long poll") == n }, waitLong, time.Millisecond)
	}
	poll(1)
	e.publish(tok, "ns", "q", "?delay_ms=300", "timed")
	a := <-got
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	poll(2)
	e.publish(tok, "ns", "q", "", "now") // undelayed, into a waiting consume
	a = <-got
	require.Equal(t, http.StatusOK, a.status, "%s", a)

	l := e.lateness()
	require.Equal(t, 2, sum(l), "two jobs came due while a consume waited: %v", l)
	require.Zero(t, sum(l[6:]), "none half a second late or more (an undelayed job counts from its publish): %v", l)
}
