package dashboard_test

import (
	"errors"
	"html/template"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/topic"
)

// navOf is the navigation of a page.
func navOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<nav>(.*?)</nav>`).FindStringSubmatch(page)
	require.NotNil(t, m, "no navigation")
	return m[1]
}

// A host's page is served in the dashboard's layout, behind its auth, and
// every page, its own included, has the same navigation leading to it.
func TestHostPageSharesTheNavigation(t *testing.T) {
	authed := 0
	e := newEnv(t,
		dashboard.WithAuth(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { authed++; next.ServeHTTP(w, r) })
		}),
		dashboard.WithPage("Tokens", "tokens", func(r *http.Request) (template.HTML, error) {
			return template.HTML(`<h1>Namespaces and tokens</h1><table id="tokens"></table>`), nil
		}),
		dashboard.WithPage("Broken", "broken", func(*http.Request) (template.HTML, error) {
			return "", errors.New("token store unreachable")
		}),
	)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "j1", "x")

	page := e.get("tokens")
	assert.Contains(t, page, "<main>\n\n"+`<h1>Namespaces and tokens</h1><table id="tokens"></table>`)
	assert.Contains(t, page, `<title>Tokens · RMQ dashboard</title>`)
	assert.Contains(t, page, `<link rel="stylesheet" href="assets/style.css">`)
	nav := navOf(t, page)
	assert.Contains(t, nav, `<a href="tokens">Tokens</a>`)
	for _, path := range []string{"", "topic?name=jobs", "schedules", "settings?topic=jobs", "finished?topic=jobs",
		"events?topic=jobs", "message?topic=jobs&id=j1"} {
		assert.Equal(t, nav, navOf(t, e.get(path)), "the navigation of %q", path)
	}
	assert.Positive(t, authed)
	before := authed
	code, _, body := e.do(http.MethodGet, "broken", nil, nil)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "token store unreachable")
	assert.Equal(t, before+1, authed, "behind the dashboard's auth")

	// A path the dashboard uses, or one that is no page name, is a
	// configuration error every page shows.
	for _, path := range []string{"topic", "settings", "a/b", "", "../x"} {
		bad := newEnvOn(t, e.rdb, dashboard.WithKeyPrefix(e.prefix),
			dashboard.WithPage("X", path, func(*http.Request) (template.HTML, error) { return "", nil }))
		code, _, body := bad.do(http.MethodGet, "", nil, nil)
		assert.Equal(t, http.StatusInternalServerError, code, path)
		assert.Contains(t, body, "page path", path)
	}
}
