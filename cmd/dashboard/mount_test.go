package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

func get(t *testing.T, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header, string(b)
}

func TestMountedUnderStripPrefix(t *testing.T) {
	e := newEnv(t)
	e.send(e.topic("orders", topic.FixedTime, 2), "a", "x")
	// Without the trailing slash, the browser is sent to the directory so
	// that relative links resolve under the mount.
	// The host's mux does it here; the dashboard does it when it sees the
	// mount path itself.
	code, hdr, _ := get(t, e.srv.URL+mount, nil)
	require.Equal(t, http.StatusTemporaryRedirect, code)
	assert.Equal(t, mount+"/", hdr.Get("Location"))
	w := httptest.NewRecorder()
	http.StripPrefix(mount, dashboard.New(e.rdb)).ServeHTTP(w, httptest.NewRequest(http.MethodGet, mount, nil))
	require.Equal(t, http.StatusMovedPermanently, w.Code)
	assert.Equal(t, mount+"/", w.Header().Get("Location"))

	page := e.get("")
	assert.Contains(t, page, `href="assets/style.css"`)
	assert.Contains(t, page, `href="topic?name=orders"`)
	assert.NotContains(t, page, `href="/`, "every link is relative")
	code, hdr, body := e.do(http.MethodGet, "assets/app.js", nil, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, hdr.Get("Content-Type"), "javascript")
	assert.Contains(t, body, "api/overview")
	code, hdr, _ = e.do(http.MethodGet, "assets/style.css", nil, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, hdr.Get("Content-Type"), "text/css")
	assert.Contains(t, hdr.Get("Content-Security-Policy"), "script-src 'self'")
	assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
}

func TestMountedWithFullPaths(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	h := dashboard.New(rdb, dashboard.WithKeyPrefix(prefix), dashboard.WithPathPrefix("/ops/queues/"),
		dashboard.WithLogger(slog.New(slog.DiscardHandler)))
	mux := http.NewServeMux()
	mux.Handle("/ops/queues/", h) // no StripPrefix: the dashboard strips it
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	code, hdr, page := get(t, srv.URL+"/ops/queues/", nil)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "No topic is stored")
	assert.Contains(t, hdr.Get("Set-Cookie"), "Path=/ops/queues")
	code, _, _ = get(t, srv.URL+"/ops/queues/assets/app.js", nil)
	assert.Equal(t, http.StatusOK, code)
	code, _, _ = get(t, srv.URL+"/ops/queues/api/overview", nil)
	assert.Equal(t, http.StatusOK, code)
}

func TestAuthHookGuardsEverything(t *testing.T) {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="rmq"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	e := newEnv(t, dashboard.WithAuth(auth))
	for _, path := range []string{"", "topic?name=x", "assets/app.js", "api/overview", "action"} {
		code, _, _ := e.do(http.MethodGet, path, nil, nil)
		assert.Equal(t, http.StatusUnauthorized, code, path)
	}
	code, _, body := e.do(http.MethodGet, "", nil, map[string]string{"Authorization": "Basic b3BzOnMzY3JldA=="})
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.Contains(body, "Topics"))
}

func TestConfigurationErrorsShowOnEveryPage(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	for name, h := range map[string]http.Handler{
		"bad key prefix": dashboard.New(rdb, dashboard.WithKeyPrefix("a{b}"), dashboard.WithLogger(slog.New(slog.DiscardHandler))),
		"short key":      dashboard.New(rdb, dashboard.WithCSRFKey([]byte("short")), dashboard.WithLogger(slog.New(slog.DiscardHandler))),
		"nil client":     dashboard.New(nil, dashboard.WithLogger(slog.New(slog.DiscardHandler))),
	} {
		for _, path := range []string{"/", "/api/overview", "/topic?name=x"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			assert.GreaterOrEqual(t, w.Code, 400, "%s %s", name, path)
		}
	}
}
