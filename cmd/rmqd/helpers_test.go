package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// TestMain runs the tests on one shared redis-server and removes the rmqd
// binary the process tests built.
func TestMain(m *testing.M) {
	if code, ok := histRole(); ok { // history_test.go's helper processes
		os.Exit(code)
	}
	redis.SetLogger(quietRedis{}) // the tests that stop Redis would flood the output
	code := redistest.Main(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// Generous bounds: the machine is shared and the race detector is slow.
const waitLong = 15 * time.Second

// syncBuffer collects the service's log for assertions and failure output.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced at each write; nil until waited on
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.buf.Write(p)
}

// waitFor waits until the output holds want, woken by each write; it fails
// the test if exited is closed first or after waitLong.
func (b *syncBuffer) waitFor(t testing.TB, want string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		b.mu.Lock()
		found := strings.Contains(b.buf.String(), want)
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-exited:
			t.Fatalf("the process exited before writing %q:\n%s", want, b.String())
		case <-deadline:
			t.Fatalf("no %q in the output after %v:\n%s", want, waitLong, b.String())
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one test's rmqd: a service on the shared redis-server (or a
// dedicated one) under a key prefix of its own, served by httptest on an
// API and an admin listener. Pool "other" is a second pool on the same
// server.
type env struct {
	t      *testing.T
	srv    *redisserver.Server
	rdb    *redis.Client
	prefix string
	svc    *service.Service
	api    *httptest.Server
	admin  *httptest.Server
	log    *syncBuffer
}

func newEnv(t *testing.T, adjust ...func(*service.Config)) *env {
	t.Helper()
	return newEnvOn(t, redistest.Shared(t), adjust...)
}

func newEnvOn(t *testing.T, srv *redisserver.Server, adjust ...func(*service.Config)) *env {
	t.Helper()
	e := &env{t: t, srv: srv, prefix: redistest.Prefix(t), log: &syncBuffer{}}
	e.rdb = redistest.Client(t, srv)
	other := redistest.Client(t, srv)
	cfg := service.Config{Prefix: e.prefix, CacheTTL: time.Second, MaxWait: time.Minute, AccessLog: true,
		Version: service.VersionInfo{Version: "test"}}
	for _, f := range adjust {
		f(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	svc, err := service.New(ctx, cfg, map[string]redis.UniversalClient{names.DefaultPool: e.rdb, "other": other}, logger)
	require.NoError(t, err)
	e.svc = svc
	e.api = httptest.NewServer(api.Handler(svc))
	e.admin = httptest.NewServer(admin.Handler(svc))
	t.Cleanup(func() {
		e.api.Close()
		e.admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close service: %v", err)
		}
		if t.Failed() {
			t.Logf("rmqd log:\n%s", e.log.String())
		}
	})
	return e
}

// answer is one HTTP response, body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string { return http.StatusText(a.status) + " " + string(a.body) }

// json decodes the body into v (failing the test on bad JSON).
func (a answer) json(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(a.body, v), "body %q", a.body)
}

// object decodes a JSON object body.
func (a answer) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	a.json(t, &m)
	return m
}

// do sends a request; headers come as "Name: value" strings.
func do(t testing.TB, method, url, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, b}
}

// requireError checks a status and a {"error": text} body.
func requireError(t *testing.T, a answer, status int, text string) {
	t.Helper()
	require.Equal(t, status, a.status, "body %s", a.body)
	require.JSONEq(t, `{"error":`+quoteJSON(text)+`}`, string(a.body))
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// token creates a token for ns (in pool, "" = default) through the admin
// API and returns it as a client sends it.
func (e *env) token(ns string, pool ...string) string {
	e.t.Helper()
	url := e.admin.URL + "/token/" + ns + "?description=test"
	if len(pool) > 0 {
		url += "&pool=" + pool[0]
	}
	a := do(e.t, "POST", url, "")
	require.Equal(e.t, http.StatusCreated, a.status, "%s", a)
	var m map[string]string
	a.json(e.t, &m)
	return m["token"]
}

// url is the API URL of a path like "/api/ns/q".
func (e *env) url(path string) string { return e.api.URL + path }

// publish publishes body to ns/q and returns the job id.
func (e *env) publish(tok, ns, q, query, body string, headers ...string) string {
	e.t.Helper()
	a := do(e.t, "PUT", e.url("/api/"+ns+"/"+q+query), body, append(headers, "X-Token: "+tok)...)
	require.Equal(e.t, http.StatusCreated, a.status, "%s", a)
	m := a.object(e.t)
	require.Equal(e.t, "published", m["msg"])
	return m["job_id"].(string)
}

// size reads GET …/size.
func (e *env) size(ns, q string) int {
	e.t.Helper()
	a := do(e.t, "GET", e.url("/api/"+ns+"/"+q+"/size"), "")
	require.Equal(e.t, http.StatusOK, a.status, "%s", a)
	var m api.SizeBody
	a.json(e.t, &m)
	return int(m.Size)
}
