package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// Finding 7: the access log wrote tokens in admin paths, 401s included.
// Every route that carries a token, by path, header or query, succeeding
// or failing (401, 404, 429, 500): no token in any line, the fingerprint
// of the path's token instead.
func TestBinaryLogsNoToken(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	url := "redis://" + srv.Addr() + "/0"
	p := startRmqd(t, url, []string{"RMQD_PREFIX=" + redistest.Prefix(t)},
		"--log-level", "debug", "--admin-account", "admin:"+adminPw, "--pool", "other="+url)
	tok := newTokenOn(t, p.admin, "ns", adminHdr)
	otherTok := newTokenOn(t, p.admin, "ns", adminHdr)
	a := do(t, "POST", p.admin+"/token/ns?description=x&pool=other", "", adminHdr)
	require.Equal(t, http.StatusCreated, a.status)
	var m map[string]string
	a.json(t, &m)
	pooled := m["token"] // other:TOKEN
	wrong := "01M8D03PQ3T5WHY8W2RPWRONG0"
	secrets := []string{tok, otherTok, strings.TrimPrefix(pooled, "other:"), wrong}

	lim := "/token/ns/" + tok + "/limit"
	for _, c := range []struct {
		method, url, body string
		hdr               []string
		status            int
	}{
		{"GET", p.admin + lim, "", nil, http.StatusUnauthorized},
		{"POST", p.admin + lim, `{"read":0,"write":1,"interval":3600}`, []string{adminHdr}, http.StatusCreated},
		{"GET", p.admin + lim, "", []string{adminHdr}, http.StatusOK},
		{"GET", p.admin + "/token/ns/" + wrong + "/limit", "", []string{adminHdr}, http.StatusNotFound},
		{"GET", p.admin + "/token/ns/" + pooled + "/limit", "", []string{adminHdr}, http.StatusNotFound},
		{"GET", p.admin + "/token/ns/" + wrong + "/limit", "", []string{"Origin: http://evil.example", adminHdr}, http.StatusNotFound},
		{"PUT", p.api + "/api/ns/q", "x", []string{"X-Token: " + tok}, http.StatusCreated},
		{"PUT", p.api + "/api/ns/q", "x", []string{"X-Token: " + tok}, http.StatusTooManyRequests},
		{"PUT", p.api + "/api/ns/q?token=" + otherTok, "x", nil, http.StatusCreated},
		{"GET", p.api + "/api/ns/q?timeout=1&token=" + otherTok, "", nil, http.StatusOK},
		{"GET", p.api + "/api/ns/q?timeout=1", "", []string{"X-Token: " + tok}, http.StatusOK},
		{"PUT", p.api + "/api/ns/q", "x", []string{"X-Token: " + wrong}, http.StatusUnauthorized},
		{"PUT", p.api + "/api/ns/q?token=" + wrong, "x", nil, http.StatusUnauthorized},
		{"PUT", p.api + "/api/ns/q", "x", []string{"X-Token: " + pooled}, http.StatusCreated},
		{"PUT", p.api + "/api/ns2/q", "x", []string{"X-Token: " + pooled}, http.StatusUnauthorized},
		{"DELETE", p.admin + lim, "", []string{adminHdr}, http.StatusOK},
	} {
		a := do(t, c.method, c.url, c.body, c.hdr...)
		require.Equal(t, c.status, a.status, "%s %s: %s", c.method, c.url, a)
	}
	// A failure is logged with its path: Redis gone, a token deleted.
	require.NoError(t, srv.Kill())
	a = do(t, "DELETE", p.admin+"/token/ns/"+tok, "", adminHdr)
	require.Equal(t, http.StatusInternalServerError, a.status, "%s", a)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, 0, p.stop(t))

	out := p.out.String()
	for _, line := range strings.Split(out, "\n") {
		for _, s := range secrets {
			require.NotContains(t, line, s, "a token in a log line")
		}
	}
	sum := sha256.Sum256([]byte(tok))
	fp := "~" + hex.EncodeToString(sum[:4])
	require.Contains(t, out, "path=/token/ns/"+fp+"/limit status=401")
	require.Contains(t, out, "path=/token/ns/"+fp+"/limit status=201")
	require.Regexp(t, `request failed.*path=/token/ns/`+fp+` `, out)
	require.Contains(t, out, "path=/token/ns/other:~")
}

// Finding 6: a ttr above 24 h answered 500. Now 400 with a clear text,
// and nothing is leased. An absolute time long past answers 400 too, and
// one a little past does not jump the queue.
func TestBinaryTTRAndAtBounds(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "first", hdr).status)
	for _, ttr := range []string{"86401", "4294967295"} {
		requireError(t, do(t, "GET", p.api+"/api/ns/q?ttr="+ttr, "", hdr), http.StatusBadRequest, "invalid ttr: at most 86400 (24 h)")
	}
	requireError(t, do(t, "GET", p.api+"/api/ns/q?ttr=4294967296", "", hdr), http.StatusBadRequest, "invalid ttr")
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body), "nothing leased")

	for _, c := range []struct{ at, text string }{
		{"1970-01-01T00:00:00Z", "invalid at: more than 24 h in the past"},
		{"0001-01-01T00:00:00Z", "invalid at: more than 24 h in the past"},
		{time.Now().Add(-25 * time.Hour).UTC().Format(time.RFC3339), "invalid at: more than 24 h in the past"},
		{"2300-01-01T00:00:00Z", "invalid at: more than 4294967295 s ahead"},
	} {
		requireError(t, do(t, "PUT", p.api+"/api/ns/q?at="+c.at, "x", hdr), http.StatusBadRequest, c.text)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q?at="+past, "an hour late", hdr).status)
	for _, want := range []string{"first", "an hour late"} {
		a := do(t, "GET", p.api+"/api/ns/q?ttr=86400", "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var j encode.JobBody
		a.json(t, &j)
		require.Equal(t, want, string(j.Data), "publish order kept")
	}
}

// Smaller finding: net/http's own answers to requests it cannot parse had
// no X-Request-Id. Each gets one, on both listeners, also after a good
// request on the same connection, and is access-logged with it.
func TestBinaryMalformedRequestsCarryARequestID(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	good := "GET /api/ns/q/size HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"bad escape", "PUT /api/nsA/% HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"negative length", "PUT /api/ns/q HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
		{"two lengths", "PUT /api/ns/q HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400},
		{"no host", "GET /api/ns/q/size HTTP/1.1\r\n\r\n", 400},
		{"bad host", "GET /api/ns/q/size HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"huge header", "GET /api/ns/q/size HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("b", 80<<10) + "\r\n\r\n", 431},
		{"unknown encoding", "PUT /api/ns/q HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"unknown expect", "PUT /api/ns/q HTTP/1.1\r\nHost: h\r\nExpect: tea\r\nContent-Length: 1\r\n\r\nx", 417},
		{"bad version", "GET /api/ns/q/size HTTP/9.9\r\nHost: h\r\n\r\n", 505},
	} {
		for _, base := range []string{p.api, p.admin} {
			for _, after := range []bool{false, true} {
				conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
				require.NoError(t, err)
				rd := bufio.NewReader(conn)
				if after {
					_, err = conn.Write([]byte(good))
					require.NoError(t, err)
					resp, err := http.ReadResponse(rd, nil)
					require.NoError(t, err)
					resp.Body.Close()
					require.Len(t, resp.Header.Get("X-Request-Id"), 26)
				}
				_, err = conn.Write([]byte(c.req))
				require.NoError(t, err)
				resp, err := http.ReadResponse(rd, nil)
				require.NoError(t, err, c.name)
				resp.Body.Close()
				conn.Close()
				require.Equal(t, c.status, resp.StatusCode, "%s on %s", c.name, base)
				id := resp.Header.Get("X-Request-Id")
				_, err = ulid.ParseStrict(id)
				require.NoError(t, err, "%s on %s, after a good request: %v: X-Request-Id %q", c.name, base, after, id)
				require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "request_id="+id) },
					waitLong, 10*time.Millisecond, "access-logged")
			}
		}
	}
	// Good answers are untouched: one id each, bodies whole.
	a := do(t, "GET", p.api+"/api/ns/q/size", "")
	require.Len(t, a.header.Values("X-Request-Id"), 1)
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":0}`, string(a.body))
}

// Smaller finding: a long poll opened before its token was deleted could
// deliver until --max-wait. It ends (404, as an empty poll) promptly when
// the token is deleted, through this rmqd or another, and the job
// published after does not go to it.
func TestBinaryLongPollEndsWhenItsTokenIsDeleted(t *testing.T) {
	srv := redistest.Shared(t)
	url := "redis://" + srv.Addr() + "/0"
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t)}
	a := startRmqd(t, url, env, "--log-level", "debug")
	b := startRmqd(t, url, env)
	other := newTokenOn(t, a.admin, "ns")
	for i, deleter := range []*rmqdProc{a, b} {
		tok := newTokenOn(t, a.admin, "ns")
		polled := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", a.api+"/api/ns/q?timeout=60", nil)
			req.Header.Set("X-Token", tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				polled <- answer{status: -1, body: []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			var body [256]byte
			n, _ := resp.Body.Read(body[:])
			polled <- answer{status: resp.StatusCode, body: body[:n]}
		}()
		require.Eventually(t, func() bool { return strings.Count(a.out.String(), "rmqd: long poll") == i+1 }, waitLong, 10*time.Millisecond)
		start := time.Now()
		require.Equal(t, http.StatusNoContent, do(t, "DELETE", deleter.admin+"/token/ns/"+tok, "").status)
		select {
		case got := <-polled:
			require.Equal(t, http.StatusNotFound, got.status, "%s", got.body)
			require.JSONEq(t, `{"msg":"no job available"}`, string(got.body))
			t.Logf("deleted through rmqd %d: the poll ended %v after", i, time.Since(start).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Fatalf("the long poll of a token deleted through rmqd %d still runs after 5 s", i)
		}
		require.Equal(t, http.StatusCreated, do(t, "PUT", a.api+"/api/ns/q", "after", "X-Token: "+other).status)
		require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(do(t, "GET", a.api+"/api/ns/q/size", "").body))
		requireError(t, do(t, "GET", a.api+"/api/ns/q", "", "X-Token: "+tok), http.StatusUnauthorized, "invalid token")
		a2 := do(t, "GET", a.api+"/api/ns/q", "", "X-Token: "+other)
		require.Equal(t, http.StatusOK, a2.status, "%s", a2)
	}
}
