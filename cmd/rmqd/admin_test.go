package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func TestAdminTokens(t *testing.T) {
	e := newEnv(t)
	adm := e.admin.URL
	long := strings.Repeat("n", 256)
	for _, c := range []struct{ path, text string }{
		{"/token/ns", "invalid description"},
		{"/token/" + long + "?description=x", "the namespace name was too long"},
		{"/token/n.s?description=x", "namespace name contains forbidden characters"},
		{"/token/ns?description=x&pool=nope", "the pool was not exists"},
		{"/token/ns?description=x&token=nope:abcdefghijklmnopqrstu", "the pool was not exists"},
		{"/token/ns?description=x&token=short", "the user token was too short"},
		{"/token/ns?description=x&token=", "the user token was too short"},
	} {
		requireError(t, do(t, "POST", adm+c.path, ""), http.StatusBadRequest, c.text)
	}

	gen := e.token("ns")
	require.Len(t, gen, 26, "a generated token is a ULID")
	user := "my-own-token-of-20-bytes"
	a := do(t, "POST", adm+"/token/ns?token="+user, "description=from+a+form", "Content-Type: application/x-www-form-urlencoded")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	require.JSONEq(t, `{"token":"`+user+`"}`, string(a.body))
	require.Contains(t, string(a.body), "\n    ", "pretty-printed like lmstfy")
	requireError(t, do(t, "POST", adm+"/token/ns?description=x&token="+user, ""), http.StatusBadRequest, "the token has already existed")
	a = do(t, "POST", adm+"/token/ns?description=p&token=other:"+user, "")
	require.JSONEq(t, `{"token":"other:`+user+`"}`, string(a.body))

	list := func(query string) map[string]string {
		t.Helper()
		a := do(t, "GET", adm+"/token/ns"+query, "")
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var m struct{ Tokens map[string]string }
		a.json(t, &m)
		return m.Tokens
	}
	require.Equal(t, map[string]string{gen: "test", user: "from a form"}, list(""))
	require.Equal(t, map[string]string{"default:" + gen: "test", "default:" + user: "from a form"}, list("?pool=default"))
	require.Equal(t, map[string]string{"other:" + user: "p"}, list("?pool=other"))
	emptyNS := do(t, "GET", adm+"/token/nobody", "")
	require.JSONEq(t, `{"tokens":{}}`, string(emptyNS.body))
	requireError(t, do(t, "GET", adm+"/token/ns?pool=nope", ""), http.StatusBadRequest, "the pool was not exists")

	// Delete: 204, unknown tokens too; the token's limit goes with it.
	require.Equal(t, http.StatusCreated, do(t, "POST", adm+"/token/ns/"+gen+"/limit", `{"read":1,"write":1,"interval":1}`).status)
	for _, tok := range []string{gen, gen, "unknown", "other:" + user} {
		require.Equal(t, http.StatusNoContent, do(t, "DELETE", adm+"/token/ns/"+tok, "").status)
	}
	requireError(t, do(t, "DELETE", adm+"/token/ns/nope:x", ""), http.StatusBadRequest, "the pool was not exists")
	require.Equal(t, map[string]string{user: "from a form"}, list(""))
	a = do(t, "GET", adm+"/token/ns/"+gen+"/limit", "")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Equal(t, "null", string(a.body))
}

func TestAdminLimits(t *testing.T) {
	e := newEnv(t)
	u := e.admin.URL + "/token/ns/some-token/limit"
	a := do(t, "GET", u, "")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Equal(t, "null", string(a.body))

	for _, c := range []struct {
		body   string
		status int
		answer string
	}{
		{`nope`, 400, `{"error":"invalid limiter"}`},
		{`{"read":0,"write":0,"interval":10}`, 400, `{"limiter":{"read":0,"write":0,"interval":10}}`},
		{`{"read":1,"write":0,"interval":0}`, 400, `{"error":"interval should be > 0"}`},
		{`{"read":1,"write":0,"interval":-1}`, 500, `{"error":"limiter interval should be > 0"}`},
		{`{"read":-1,"write":0,"interval":1}`, 500, `{"error":"the read and write of limiter can't be <= 0 at the same time"}`},
	} {
		for _, method := range []string{"POST", "PUT"} {
			a := do(t, method, u, c.body)
			require.Equal(t, c.status, a.status, "%s %s: %s", method, c.body, a)
			require.JSONEq(t, c.answer, string(a.body))
		}
	}
	a = do(t, "POST", u, `{"read":1,"write":2,"interval":10}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	require.JSONEq(t, `{"limiter":{"read":1,"write":2,"interval":10}}`, string(a.body))
	a = do(t, "POST", u, `{"read":5,"write":5,"interval":5}`)
	requireError(t, a, http.StatusInternalServerError, "throttler token(some-token) has already exists")
	a = do(t, "GET", u, "")
	require.Equal(t, http.StatusOK, a.status)
	require.JSONEq(t, `{"read":1,"write":2,"interval":10}`, string(a.body))
	a = do(t, "PUT", u, `{"read":3,"write":0,"interval":60}`)
	require.Equal(t, http.StatusOK, a.status)
	require.JSONEq(t, `{"limiter":{"read":3,"write":0,"interval":60}}`, string(a.body))
	a = do(t, "PUT", e.admin.URL+"/token/ns2/other:tok/limit", `{"read":0,"write":7,"interval":1}`)
	require.Equal(t, http.StatusOK, a.status)

	a = do(t, "GET", e.admin.URL+"/limits?force_update=true", "")
	require.Equal(t, http.StatusOK, a.status)
	require.JSONEq(t, `[{"namespace":"ns","token":"some-token","limiter":{"read":3,"write":0,"interval":60}},
		{"namespace":"ns2","token":"other:tok","limiter":{"read":0,"write":7,"interval":1}}]`, string(a.body))

	for range 2 {
		a = do(t, "DELETE", u, "")
		require.Equal(t, http.StatusOK, a.status)
		require.JSONEq(t, `{"msg":"success"}`, string(a.body))
	}
	require.Equal(t, http.StatusNotFound, do(t, "GET", u, "").status)
}

func TestAdminBasicAuth(t *testing.T) {
	e := newEnv(t, func(c *service.Config) { c.Accounts = map[string]string{"ops": "s3cret"} })
	adm := e.admin.URL
	for _, c := range []struct{ method, path string }{
		{"POST", "/token/ns?description=x"}, {"GET", "/token/ns"}, {"DELETE", "/token/ns/t"},
		{"GET", "/token/ns/t/limit"}, {"PUT", "/token/ns/t/limit"}, {"GET", "/limits"}, {"POST", "/accesslog?status=disable"},
		{"GET", "/queue/ns/q"}, {"POST", "/queue/ns/q/pause"}, {"GET", "/forwards"},
	} {
		for _, auth := range []string{"", "Authorization: Basic b3BzOndyb25n"} { // ops:wrong
			var hs []string
			if auth != "" {
				hs = append(hs, auth)
			}
			a := do(t, c.method, adm+c.path, "", hs...)
			require.Equal(t, http.StatusUnauthorized, a.status, "%s %s", c.method, c.path)
			require.Empty(t, a.body)
			require.Equal(t, `Basic realm="Authorization Required"`, a.header.Get("WWW-Authenticate"))
		}
	}
	for _, path := range []string{"/version", "/pools", "/info", "/metrics", "/accesslog"} {
		require.Equal(t, http.StatusOK, do(t, "GET", adm+path, "").status, path)
	}
	req, err := http.NewRequest("POST", adm+"/token/ns?description=x", nil)
	require.NoError(t, err)
	req.SetBasicAuth("ops", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

func TestAdminOperationalRoutes(t *testing.T) {
	e := newEnv(t)
	adm := e.admin.URL
	a := do(t, "GET", adm+"/version", "")
	require.JSONEq(t, `{"version":"test","build_commit":"","build_date":""}`, string(a.body))
	a = do(t, "GET", adm+"/pools", "")
	require.JSONEq(t, `["default","other"]`, string(a.body))

	a = do(t, "GET", adm+"/info", "")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "text/plain; charset=utf-8", a.header.Get("Content-Type"))
	require.Equal(t, "{}", string(a.body))
	a = do(t, "GET", adm+"/info?pool=nope", "")
	require.Equal(t, http.StatusOK, a.status)
	require.Empty(t, a.body)

	// A queue too long for "NS.Q" still shows under its own names.
	tok := e.token("ns")
	long := strings.Repeat("q", 200)
	e.publish(tok, "ns", long, "", "x")
	e.publish(tok, "ns", "short", "", "x")
	require.Equal(t, 1, e.size("ns", long))
	a = do(t, "GET", adm+"/info", "")
	require.JSONEq(t, `{"ns":["`+long+`","short"]}`, string(a.body))

	a = do(t, "GET", adm+"/accesslog", "")
	require.JSONEq(t, `{"status":"enabled"}`, string(a.body))
	requireError(t, do(t, "POST", adm+"/accesslog?status=off", ""), http.StatusBadRequest, "invalid status")
	a = do(t, "POST", adm+"/accesslog?status=disable", "")
	require.JSONEq(t, `{"status":"disabled"}`, string(a.body))
	before := strings.Count(e.log.String(), "msg=access")
	do(t, "GET", e.url("/api/ns/q/size?token=secret-in-query"), "")
	require.Equal(t, before, strings.Count(e.log.String(), "msg=access"), "no access line while disabled")
	a = do(t, "POST", adm+"/accesslog?status=enable", "")
	require.JSONEq(t, `{"status":"enabled"}`, string(a.body))
	before = strings.Count(e.log.String(), "msg=access")
	a = do(t, "GET", e.url("/api/ns/q/size?token=secret-in-query"), "")
	require.Equal(t, before+1, strings.Count(e.log.String(), "msg=access"), "one line per request")
	line := lastLine(e.log.String(), "msg=access")
	require.Contains(t, line, "request_id="+a.header.Get("X-Request-ID"))
	require.Contains(t, line, "path=/api/ns/q/size")
	require.Contains(t, line, "status=200")
	require.NotContains(t, e.log.String(), "secret-in-query", "the query (it may hold a token) is never logged")

	// Profiles are off unless asked for (TestBinaryPprofOnlyForAdmins).
	a = do(t, "GET", adm+"/debug/pprof/cmdline", "")
	require.Equal(t, http.StatusNotFound, a.status)
}

func lastLine(s, containing string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), containing) {
			last = sc.Text()
		}
	}
	return last
}

func TestAdminQueue(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "", "a")
	e.publish(tok, "ns", "q", "", "b")
	e.publish(tok, "ns", "q", "?delay=3600", "c")
	a := do(t, "GET", e.admin.URL+"/queue/ns/q", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"namespace":"ns","queue":"q","type":"fixedtime","ready":2,"delayed":1,"in_flight":0,"dead":0,"paused":false}`, string(a.body))
	requireError(t, do(t, "GET", e.admin.URL+"/queue/ns/none", ""), http.StatusNotFound, "queue not found")
	requireError(t, do(t, "GET", e.admin.URL+"/queue/ns/_q", ""), http.StatusBadRequest, "queue name contains forbidden characters")
	requireError(t, do(t, "GET", e.admin.URL+"/queue/ns/q?pool=nope", ""), http.StatusBadRequest, "the pool was not exists")
	requireError(t, do(t, "POST", e.admin.URL+"/queue/ns/none/pause", ""), http.StatusNotFound, "queue not found")

	require.Equal(t, http.StatusNoContent, do(t, "POST", e.admin.URL+"/queue/ns/q/pause", "").status)
	a = do(t, "GET", e.admin.URL+"/queue/ns/q", "")
	require.Contains(t, string(a.body), `"paused":true`)
	requireNoJob(t, do(t, "GET", e.url("/api/ns/q"), "", "X-Token: "+tok))
	require.Equal(t, http.StatusNoContent, do(t, "POST", e.admin.URL+"/queue/ns/q/resume", "").status)
	// A resume reaches pullers through the topic's wake-up channel, so a
	// consume right after it may still see the queue paused: wait for it.
	e.consumeJob(tok, "/api/ns/q?timeout=10")
}
