package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// Tests of an attacker's findings against the real rmqd binary and a real
// redis-server: each fails on the tree before the fix.

const (
	redisPw  = "S3cretRedisPw"
	adminPw  = "s3cret-admin-pw"
	adminHdr = "Authorization: Basic YWRtaW46czNjcmV0LWFkbWluLXB3" // admin:s3cret-admin-pw
)

var (
	clientsMu sync.Mutex
	clients   = map[string]*http.Client{}
)

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (127.0.0.0/8 is all loopback on Linux): a client address of
// its own for the guessing guard.
func clientFrom(ip string) *http.Client {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c := clients[ip]; c != nil {
		return c
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
	clients[ip] = c
	return c
}

// doOn is do through client c; a "Host: name" header sets the request's Host.
func doOn(t *testing.T, c *http.Client, method, url, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Add(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

// newTokenOn creates a token for ns through the admin listener admin.
func newTokenOn(t *testing.T, admin, ns string, headers ...string) string {
	t.Helper()
	a := do(t, "POST", admin+"/token/"+ns+"?description=test", "", headers...)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var m map[string]string
	a.json(t, &m)
	return m["token"]
}

// Finding 1: with accounts set, profiles answered anyone, the command line
// with the Redis password and the accounts included.
func TestBinaryPprofOnlyForAdmins(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{Password: redisPw})
	url := "redis://:" + redisPw + "@" + srv.Addr() + "/0"
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t)}
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1", "/debug/pprof/symbol", "/debug/pprof/trace?seconds=1"}

	p := startRmqd(t, url, env, "--admin-account", "admin:"+adminPw)
	for _, path := range paths {
		for _, hdr := range [][]string{nil, {adminHdr}} {
			a := do(t, "GET", p.admin+path, "", hdr...)
			require.Equal(t, http.StatusNotFound, a.status, "%s without --pprof: %s", path, a)
		}
	}
	require.Equal(t, 0, p.stop(t))

	// --pprof without an account is refused at start, credentials unquoted.
	out, err := exec.Command(rmqdBinary(t), "--pprof", "--redis-url", url).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 2, exit.ExitCode())
	require.Contains(t, string(out), "--pprof needs --admin-account")
	require.NotContains(t, string(out), redisPw)

	p = startRmqd(t, url, env, "--admin-account", "admin:"+adminPw, "--pprof")
	for _, path := range paths {
		a := do(t, "GET", p.admin+path, "")
		require.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", path, a)
		a = do(t, "GET", p.admin+path, "", "Authorization: Basic YWRtaW46d3Jvbmc=") // admin:wrong
		require.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", path, a)
	}
	a := do(t, "GET", p.admin+"/debug/pprof/", "", adminHdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	a = do(t, "GET", p.admin+"/debug/pprof/cmdline", "", adminHdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	cmdline := string(a.body)
	require.Contains(t, cmdline, "--redis-url\x00redis://:***@"+srv.Addr())
	require.Contains(t, cmdline, "--admin-account\x00admin:***")
	require.NotContains(t, cmdline, redisPw)
	require.NotContains(t, cmdline, adminPw)
}

// No route, log line, help text or error shows a password rmqd was given.
func TestBinaryShowsNoCredentials(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{Password: redisPw})
	url := "redis://:" + redisPw + "@" + srv.Addr() + "/0"
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t), "RMQD_LOG_LEVEL=debug"}
	// (The profiles' command line: TestBinaryPprofOnlyForAdmins.)
	p := startRmqd(t, url, env, "--admin-account", "admin:"+adminPw, "--pool", "other="+url)
	tok := newTokenOn(t, p.admin, "ns", adminHdr)
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok).status)
	for _, path := range []string{"/version", "/pools", "/info", "/info?pool=other", "/metrics", "/limits", "/accesslog",
		"/token/ns", "/queue/ns/q", "/dashboard/", "/dashboard/topic?name=ns.q", "/dashboard-tokens"} {
		a := do(t, "GET", p.admin+path, "", adminHdr)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", path, a)
		require.NotContains(t, string(a.body), redisPw, path)
		require.NotContains(t, string(a.body), adminPw, path)
	}
	// Errors: Redis refuses the connection while it is down.
	require.NoError(t, srv.Kill())
	a := do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok)
	require.Equal(t, http.StatusInternalServerError, a.status, "%s", a)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, 0, p.stop(t))
	out := p.out.String()
	require.Contains(t, out, "request failed", "the failure was logged")
	require.NotContains(t, out, redisPw)
	require.NotContains(t, out, adminPw)

	bin := rmqdBinary(t)
	for _, c := range []struct {
		args []string
		env  []string
		code int
	}{
		{[]string{"--help"}, []string{"RMQD_REDIS_URL=" + url}, 0},
		{[]string{"--redis-url", "redis://:" + redisPw + "@127.0.0.1:notaport/0"}, nil, 1},
		{[]string{"--pool", "bad name=" + url}, nil, 2},
		{[]string{"--pool", "other"}, []string{"RMQD_ADMIN_ACCOUNT=admin:" + adminPw}, 2},
		{[]string{"--admin-account", adminPw}, nil, 2},
		{[]string{"--admin-account", "admin:" + adminPw, "--log-format", "yaml"}, nil, 2},
	} {
		cmd := exec.Command(bin, append(c.args, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")...)
		cmd.Env = append(cmd.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &exit, "%v: %s", c.args, out)
			code = exit.ExitCode()
		}
		require.Equal(t, c.code, code, "%v: %s", c.args, out)
		require.NotContains(t, string(out), redisPw, "%v", c.args)
		require.NotContains(t, string(out), adminPw, "%v", c.args)
	}
}

// crossSiteHeaders are what a browser sends with a request a page of
// another site made.
var crossSiteHeaders = map[string][]string{
	"other origin":          {"Origin: http://evil.example"},
	"same host, other port": {"Origin: http://127.0.0.1:1"},
	"null origin":           {"Origin: null"},
	"other referer":         {"Referer: http://evil.example/page"},
	"fetch metadata":        {"Sec-Fetch-Site: cross-site"},
	"same site":             {"Sec-Fetch-Site: same-site", "Origin: http://localhost:1"},
}

// Finding 2: the admin API's state-changing routes did what a page of
// another site asked, with the admin's credentials. Each is refused (403)
// and changes nothing; a program (no Origin) and a page of the admin
// origin itself still may.
func TestBinaryAdminRefusesCrossSiteRequests(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + prefix}, "--admin-account", "admin:"+adminPw)
	tok := newTokenOn(t, p.admin, "ns", adminHdr)
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok).status)
	limitBody := `{"read":5,"write":5,"interval":60}`
	require.Equal(t, http.StatusCreated, do(t, "POST", p.admin+"/token/ns/"+tok+"/limit", limitBody, adminHdr).status)

	state := func() string {
		t.Helper()
		toks := do(t, "GET", p.admin+"/token/ns", "", adminHdr)
		lim := do(t, "GET", p.admin+"/token/ns/"+tok+"/limit", "", adminHdr)
		q := do(t, "GET", p.admin+"/queue/ns/q", "", adminHdr)
		ql := do(t, "GET", p.admin+"/queue/ns/q/limits", "", adminHdr)
		al := do(t, "GET", p.admin+"/accesslog", "")
		return fmt.Sprintf("%s\n%s\n%s\n%s\n%s\nkeys=%d", toks.body, lim.body, q.body, ql.body, al.body,
			len(redistest.KeysWithPrefix(t, rdb, prefix+":rmqd:")))
	}
	routes := []struct{ method, path, body string }{
		{"POST", "/token/ns?description=evil", ""},
		{"POST", "/token/ns/" + tok + "/limit", `{"read":1,"write":1,"interval":86400}`},
		{"PUT", "/token/ns/" + tok + "/limit", `{"read":1,"write":1,"interval":86400}`},
		{"DELETE", "/token/ns/" + tok + "/limit", ""},
		{"DELETE", "/token/ns/" + tok, ""},
		{"POST", "/queue/ns/q/pause", ""},
		{"POST", "/queue/ns/q/resume", ""},
		{"PUT", "/queue/ns/q/limits", `{"concurrency":1}`},
		{"DELETE", "/queue/ns/q/limits", ""},
		{"POST", "/accesslog?status=disable", ""},
		{"POST", "/dashboard/action", "op=pause&topic=ns.q&confirm=yes"},
	}
	for _, paused := range []bool{false, true} {
		if paused {
			// Now a cross-site resume is the one that would change something.
			require.Equal(t, http.StatusNoContent, do(t, "POST", p.admin+"/queue/ns/q/pause", "", adminHdr).status)
		}
		before := state()
		for _, rt := range routes {
			for name, hdr := range crossSiteHeaders {
				a := do(t, rt.method, p.admin+rt.path, rt.body, append(hdr, adminHdr, "Content-Type: application/x-www-form-urlencoded")...)
				require.Equal(t, http.StatusForbidden, a.status, "%s %s, %s: %s", rt.method, rt.path, name, a)
				if !strings.HasPrefix(rt.path, "/dashboard/") {
					requireError(t, a, http.StatusForbidden, "cross-site request refused")
				}
			}
		}
		require.Equal(t, before, state(), "nothing changed")
	}

	// The same requests from a program, or a page of the admin origin.
	a := do(t, "POST", p.admin+"/token/ns?description=program", "", adminHdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "POST", p.admin+"/token/ns?description=page", "", adminHdr, "Origin: "+p.admin, "Sec-Fetch-Site: same-origin")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "POST", p.admin+"/queue/ns/q/resume", "", adminHdr, "Referer: "+p.admin+"/dashboard/")
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
}

// Finding 2, DNS rebinding: the admin listener answered any Host. It
// answers IP addresses, localhost and --admin-host names only.
func TestBinaryAdminAnswersOnlyItsHosts(t *testing.T) {
	srv := redistest.Shared(t)
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t)}
	url := "redis://" + srv.Addr() + "/0"
	p := startRmqd(t, url, env)
	port := p.admin[strings.LastIndex(p.admin, ":")+1:]
	for _, host := range []string{"evil.test:" + port, "evil.test", "127.0.0.1.evil.test:" + port, "localhost.evil.test:" + port} {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/token/ns"}, {"GET", "/info"}, {"GET", "/metrics"}, {"GET", "/dashboard/"}, {"GET", "/dashboard-tokens"},
			{"POST", "/token/ns?description=rebound"}, {"POST", "/queue/ns/q/pause"},
		} {
			a := doOn(t, http.DefaultClient, rt.method, p.admin+rt.path, "", "Host: "+host)
			requireError(t, a, http.StatusForbidden, "host not served: add it with --admin-host")
			require.Len(t, a.header.Get("X-Request-ID"), 26)
		}
	}
	require.JSONEq(t, `{"tokens":{}}`, string(do(t, "GET", p.admin+"/token/ns", "").body), "no token was made")
	for _, host := range []string{"localhost:" + port, "LocalHost", "127.0.0.1:" + port, "[::1]:" + port, "10.1.2.3"} {
		a := doOn(t, http.DefaultClient, "GET", p.admin+"/token/ns", "", "Host: "+host)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", host, a)
	}
	// The API listener serves programs by token, not browsers: any Host.
	a := doOn(t, http.DefaultClient, "GET", p.api+"/api/ns/q/size", "", "Host: evil.test")
	require.Equal(t, http.StatusOK, a.status, "%s", a)

	q := startRmqd(t, url, env, "--admin-host", "rmq.example.test", "--admin-host", "ops.example.test")
	for _, host := range []string{"rmq.example.test", "RMQ.example.test.:443", "ops.example.test:8080"} {
		a := doOn(t, http.DefaultClient, "GET", q.admin+"/version", "", "Host: "+host)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", host, a)
	}
	a = doOn(t, http.DefaultClient, "GET", q.admin+"/version", "", "Host: evil.test")
	require.Equal(t, http.StatusForbidden, a.status, "%s", a)
}
