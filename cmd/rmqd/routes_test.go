package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownRoutesAndRequestIDs(t *testing.T) {
	e := newEnv(t)
	seen := map[string]bool{}
	checkID := func(a answer) {
		t.Helper()
		id := a.header.Get("X-Request-ID")
		require.Len(t, id, 26, "X-Request-ID on %s", a)
		require.False(t, seen[id], "request id %s repeated", id)
		seen[id] = true
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/api"}, {"GET", "/api/ns"}, {"GET", "/api/ns/q/"}, {"PATCH", "/api/ns/q"},
		{"POST", "/api/ns/q"}, {"GET", "/api/ns/q/bulk"}, {"GET", "/api/ns/q/job"}, {"GET", "/api/ns/q/a/b/c/d"},
	} {
		a := do(t, c.method, e.url(c.path), "", "X-Request-ID: mine")
		requireError(t, a, http.StatusNotFound, "api not found")
		checkID(a)
		require.NotEqual(t, "mine", a.header.Get("X-Request-ID"))
	}
	for _, c := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/token"}, {"PUT", "/version"}, {"GET", "/api/ns/q"}} {
		a := do(t, c.method, e.admin.URL+c.path, "")
		require.Equal(t, http.StatusNotFound, a.status, "%s %s", c.method, c.path)
		require.Equal(t, "404 page not found\n", string(a.body))
		checkID(a)
	}
	// Errors and successes carry one too.
	checkID(do(t, "PUT", e.url("/api/ns/q"), "x"))
	checkID(do(t, "GET", e.url("/api/ns/q/size"), ""))
	checkID(do(t, "GET", e.admin.URL+"/version", ""))
}

func TestNameChecksComeBeforeTheToken(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("q", 256)
	for _, c := range []struct{ method, path, text string }{
		{"PUT", "/api/ns/" + long, "namespace or queue name too long"},
		{"PUT", "/api/n%20s/q", "namespace name contains forbidden characters"},
		{"PUT", "/api/ns/_q", "queue name contains forbidden characters"},
		{"GET", "/api/ns/q%2B/peek", "queue name contains forbidden characters"},
		{"DELETE", "/api/ns/_q/job/x", "queue name contains forbidden characters"},
		{"GET", "/api/ns/_q/size", "queue name contains forbidden characters"},
		{"GET", "/api/n.s/q1,q2", "namespace name contains forbidden characters"},
	} {
		requireError(t, do(t, c.method, e.url(c.path), ""), http.StatusBadRequest, c.text)
	}
	// The consume route checks the queue part later, after the token and
	// its own parameters, and allows '_' and any length.
	requireError(t, do(t, "GET", e.url("/api/ns/,,"), ""), http.StatusUnauthorized, "token not found")
	tok := e.token("ns")
	requireError(t, do(t, "GET", e.url("/api/ns/,,?ttr=x"), "", "X-Token: "+tok), http.StatusBadRequest, "invalid ttr")
	requireError(t, do(t, "GET", e.url("/api/ns/,,"), "", "X-Token: "+tok), http.StatusBadRequest, "invalid queue name(s)")
}

func TestTokens(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	otherNS := e.token("ns2")
	u := e.url("/api/ns/q/peek")

	requireError(t, do(t, "GET", u, ""), http.StatusUnauthorized, "token not found")
	requireError(t, do(t, "GET", u, "", "X-Token: nope"), http.StatusUnauthorized, "invalid token")
	requireError(t, do(t, "GET", u, "", "X-Token: "+otherNS), http.StatusUnauthorized, "invalid token")
	requireError(t, do(t, "GET", u, "", "X-Token: nopool:"+tok), http.StatusNotFound, "pool not found")
	// The header wins; the query counts only without it.
	requireError(t, do(t, "GET", u+"?token="+tok, "", "X-Token: nope"), http.StatusUnauthorized, "invalid token")
	requireError(t, do(t, "GET", u+"?token="+tok, ""), http.StatusNotFound, "the queue is empty")
	requireError(t, do(t, "GET", u, "", "X-Token: "+tok), http.StatusNotFound, "the queue is empty")
	requireError(t, do(t, "GET", u, "", "X-Token: default:"+tok), http.StatusNotFound, "the queue is empty")

	// A token of another pool works only with its prefix.
	poolTok := e.token("ns", "other")
	require.True(t, strings.HasPrefix(poolTok, "other:"), poolTok)
	requireError(t, do(t, "GET", u, "", "X-Token: "+poolTok), http.StatusNotFound, "the queue is empty")
	requireError(t, do(t, "GET", u, "", "X-Token: "+strings.TrimPrefix(poolTok, "other:")), http.StatusUnauthorized, "invalid token")

	// Deleting a token takes effect at once on this process (cached or not).
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.admin.URL+"/token/ns/"+tok, "").status)
	requireError(t, do(t, "GET", u, "", "X-Token: "+tok), http.StatusUnauthorized, "invalid token")

	// Size routes need none, but a bad pool prefix is still refused.
	require.Equal(t, http.StatusOK, do(t, "GET", e.url("/api/ns/q/size"), "").status)
	require.Equal(t, http.StatusOK, do(t, "GET", e.url("/api/ns/q/deadletter/size"), "", "X-Token: wrong").status)
	requireError(t, do(t, "GET", e.url("/api/ns/q/size"), "", "X-Token: nopool:x"), http.StatusNotFound, "pool not found")
	requireError(t, do(t, "GET", e.url("/api/ns/q/deadletter/size?token=nopool:x"), ""), http.StatusNotFound, "pool not found")
}

// Every token-protected route refuses a missing token with 401.
func TestEveryProtectedRouteNeedsAToken(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{"PUT", "/api/ns/q"}, {"PUT", "/api/ns/q/bulk"}, {"PUT", "/api/ns/q/job/x"}, {"GET", "/api/ns/q"},
		{"GET", "/api/ns/q1,q2"}, {"DELETE", "/api/ns/q/job/x"}, {"POST", "/api/ns/q/job/x/nack"},
		{"GET", "/api/ns/q/peek"}, {"GET", "/api/ns/q/job/x"}, {"DELETE", "/api/ns/q"},
		{"GET", "/api/ns/q/deadletter"}, {"PUT", "/api/ns/q/deadletter"}, {"DELETE", "/api/ns/q/deadletter"},
	} {
		requireError(t, do(t, c.method, e.url(c.path), "x"), http.StatusUnauthorized, "token not found")
	}
}
