package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// brokenWriter is a connection whose client is gone: every write fails.
type brokenWriter struct{ h http.Header }

func (b *brokenWriter) Header() http.Header       { return b.h }
func (b *brokenWriter) WriteHeader(int)           {}
func (b *brokenWriter) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }

// A consume whose answer could not be written left its jobs leased: they
// came back only after ttr, a try spent (with lmstfy's default tries=1:
// dead, never processed). They are released at once now, no try counted.
func TestConsumeReleasesJobsItCouldNotAnswer(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	id := e.publish(tok, "ns", "q", "?tries=1", "payload")
	h := api.Handler(e.svc)
	req := httptest.NewRequest("GET", "/api/ns/q?ttr=600", nil)
	req.Header.Set("X-Token", tok)
	h.ServeHTTP(&brokenWriter{h: http.Header{}}, req)

	// At once, not after the 600 s lease, and with its one try left.
	a := do(t, "GET", e.url("/api/ns/q?ttr=60"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var j encode.JobBody
	a.json(t, &j)
	require.Equal(t, id, j.JobID)
	require.Equal(t, "payload", string(j.Data))
	require.Equal(t, 0, j.RemainTries, "this delivery is its first: no try was counted")
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/"+id), "", "X-Token: "+tok).status)
	a = do(t, "GET", e.url("/api/ns/q/deadletter/size"), "")
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":0}`, string(a.body))
}
