package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/ids"
)

// The access log fingerprinted a token only in the canonical path
// /token/NS/TOKEN: a doubled slash, a dot segment, an escaped dot or
// another case logged it in clear (the mux redirects or answers 404, but
// the line was written first). Every form is logged with the token's
// fingerprint now.
func TestBinaryNonCanonicalTokenPathsLogNoToken(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "nsA")
	for _, path := range []string{
		"//token/nsA/" + tok,
		"/token//nsA/" + tok,
		"/token/nsA/./" + tok,
		"/token/nsA/%2e/" + tok,
		"/./token/nsA/" + tok,
		"/Token/nsA/" + tok,
		"/TOKEN/nsA/" + tok + "/limit",
		"/token/nsA%2Fx/" + tok + "/limit",
		"/x/../token/nsA/" + tok,
		"/token/nsA/" + tok + "/",
	} {
		req, err := http.NewRequest("GET", p.admin+"/version", nil)
		require.NoError(t, err)
		req.URL.RawPath, req.URL.Path = "", ""
		req.URL.Opaque = "//" + req.URL.Host + path // sent as written: no client-side cleaning
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, path)
		resp.Body.Close()
	}
	// The last request's line is written once its answer is: one more
	// request flushes nothing new but the stop below writes every line.
	require.Equal(t, 0, p.stop(t))
	out := p.out.String()
	require.Equal(t, 10, strings.Count(out, ids.Fingerprint(tok)), "one fingerprint per request:\n%s", out)
	require.NotContains(t, out, tok)
}
