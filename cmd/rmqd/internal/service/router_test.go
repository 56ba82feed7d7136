package service

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API router matches what ServeMux matched with the same patterns
// (pattern and unescaped values), except that it never redirects.
func TestAPIRouterMatchesServeMux(t *testing.T) {
	s := &Service{}
	rt := &APIRouter{}
	mux := http.NewServeMux()
	for _, p := range []string{
		"PUT /api/{ns}/{q}", "PUT /api/{ns}/{q}/bulk", "PUT /api/{ns}/{q}/job/{id}", "GET /api/{ns}/{q}",
		"DELETE /api/{ns}/{q}/job/{id}", "POST /api/{ns}/{q}/job/{id}/nack", "GET /api/{ns}/{q}/peek",
		"GET /api/{ns}/{q}/job/{id}", "GET /api/{ns}/{q}/size", "DELETE /api/{ns}/{q}", "GET /api/{ns}/{q}/deadletter",
		"GET /api/{ns}/{q}/deadletter/size", "PUT /api/{ns}/{q}/deadletter", "DELETE /api/{ns}/{q}/deadletter",
	} {
		rt.Handle(p, s.QueueRoute(RouteOpts{}, nil))
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	methods := []string{"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"}
	paths := []string{
		"/", "/api", "/api/", "/api/ns", "/api/ns/", "/api/ns/q", "/api/ns/q/", "/api/ns/q1,q2", "/api/ns/q/bulk",
		"/api/ns/q/bulk/x", "/api/ns/q/job", "/api/ns/q/job/", "/api/ns/q/job/01ABC", "/api/ns/q/job/a%2Fb",
		"/api/ns/q/job/x/nack", "/api/ns/q/job/x/nack/y", "/api/ns/q/peek", "/api/ns/q/size", "/api/ns/q/deadletter",
		"/api/ns/q/deadletter/size", "/api/ns/q/deadletter/x", "/api/n%20s/q", "/api/ns/q%2B/peek", "/api/ns/q/a/b/c/d",
		"/api/ns/q/a/b/c/d/e/f", "/apix/ns/q", "/api/ns/job/peek", "/api/ns/size",
	}
	for _, m := range methods {
		for _, p := range paths {
			r := httptest.NewRequest(m, p, nil)
			route, ns, q, id := rt.match(r)
			h, pattern := mux.Handler(r)
			if pattern == "" || isRedirect(h, r) {
				require.Nil(t, route, "%s %s: ServeMux found nothing", m, p)
				continue
			}
			require.NotNil(t, route, "%s %s: ServeMux found %s", m, p, pattern)
			require.Equal(t, pattern, route.pattern, "%s %s", m, p)
			mux.ServeHTTP(httptest.NewRecorder(), r) // sets the path values
			require.Equal(t, r.PathValue("ns"), ns, "%s %s", m, p)
			require.Equal(t, r.PathValue("q"), q, "%s %s", m, p)
			require.Equal(t, r.PathValue("id"), id, "%s %s", m, p)
		}
	}
}

func isRedirect(h http.Handler, r *http.Request) bool {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect || w.Code == http.StatusPermanentRedirect
}
