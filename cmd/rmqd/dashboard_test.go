package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func withDashboard(c *service.Config) { c.Dashboard = "/dashboard/" }

func TestDashboardIsMountedOnTheAdminPort(t *testing.T) {
	e := newEnv(t, withDashboard)
	tok := e.token("shop")
	e.publish(tok, "shop", "orders", "", "x")
	a := do(t, "GET", e.admin.URL+"/dashboard/", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Contains(t, a.header.Get("Content-Type"), "text/html")
	require.Contains(t, string(a.body), "shop.orders", "the queue's topic is listed")
	require.Len(t, a.header.Get("X-Request-ID"), 26)
	// Not on the API port, and not without the flag.
	requireError(t, do(t, "GET", e.url("/dashboard/"), ""), http.StatusNotFound, "api not found")
	off := newEnv(t)
	require.Equal(t, http.StatusNotFound, do(t, "GET", off.admin.URL+"/dashboard/", "").status)
	require.Equal(t, http.StatusNotFound, do(t, "GET", off.admin.URL+"/dashboard-tokens", "").status)
}

func TestTokenPageMasksTokensAndEscapes(t *testing.T) {
	e := newEnv(t, withDashboard)
	tok := e.token("shop")
	a := do(t, "POST", e.admin.URL+"/token/shop?description=%3Cscript%3Ealert(1)%3C/script%3E", "")
	require.Equal(t, http.StatusCreated, a.status)
	poolTok := e.token("eu", "other")

	a = do(t, "GET", e.admin.URL+"/dashboard-tokens", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	page := string(a.body)
	require.Contains(t, page, "<td>shop</td>")
	require.Contains(t, page, "<td>eu</td>")
	require.Contains(t, page, tok[:4]+"…")
	require.NotContains(t, page, tok, "token values are masked")
	require.NotContains(t, page, strings.TrimPrefix(poolTok, "other:"))
	require.NotContains(t, page, "<script>")
	require.Contains(t, page, "&lt;script&gt;")
	require.Contains(t, page, `<a class="brand" href="./">RMQ</a>`, "the dashboard's header")
	require.Contains(t, page, `<link rel="stylesheet" href="assets/style.css">`, "styled as the dashboard")
	require.Contains(t, a.header.Get("Content-Security-Policy"), "style-src 'self'")
	css := do(t, "GET", e.admin.URL+"/dashboard/assets/style.css", "")
	require.Equal(t, http.StatusOK, css.status)
	require.Contains(t, css.header.Get("Content-Type"), "text/css")
	// It is one of the dashboard's pages (its older address leads to it),
	// and every page, its own included, links to it.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(e.admin.URL + "/dashboard-tokens")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "dashboard/tokens", res.Header.Get("Location"))
	for _, path := range []string{"/dashboard/", "/dashboard/topic?name=shop.orders", "/dashboard/schedules", "/dashboard/tokens"} {
		a = do(t, "GET", e.admin.URL+path, "")
		require.Contains(t, string(a.body), `<a href="workers" id="workers-link">Workers</a> <a href="tokens">Tokens</a></nav>`, path)
	}
}

func TestDashboardBehindAdminAccounts(t *testing.T) {
	e := newEnv(t, withDashboard, func(c *service.Config) { c.Accounts = map[string]string{"ops": "pw"} })
	for _, path := range []string{"/dashboard/", "/dashboard-tokens"} {
		a := do(t, "GET", e.admin.URL+path, "")
		require.Equal(t, http.StatusUnauthorized, a.status, path)
		require.Equal(t, `Basic realm="Authorization Required"`, a.header.Get("WWW-Authenticate"))
		a = do(t, "GET", e.admin.URL+path, "", "Authorization: Basic b3BzOnB3") // ops:pw
		require.Equal(t, http.StatusOK, a.status, "%s: %s", path, a)
	}
}
