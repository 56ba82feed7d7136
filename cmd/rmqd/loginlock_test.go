package main

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// Failed logins from one address locked that address out, the admin at
// work behind it included: the right password answered 429 as well. The
// credentials that succeeded from the address still open now; other
// logins from it, right or wrong, wait until the allowance refills.
func TestBinaryLoginLockoutLetsTheKnownAdminIn(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)},
		"--admin-account", "admin:"+adminPw, "--admin-account", "ops:"+adminPw+"2", "--max-auth-failures", "3")
	basic := func(user, pass string) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	require.Equal(t, http.StatusOK, do(t, "GET", p.admin+"/limits", "", adminHdr).status, "the admin at work")
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, do(t, "GET", p.admin+"/limits", "", basic("admin", "guess")).status)
	}
	require.Equal(t, http.StatusTooManyRequests, do(t, "GET", p.admin+"/limits", "", basic("admin", "guess")).status, "refused")
	require.Equal(t, http.StatusTooManyRequests, do(t, "GET", p.admin+"/limits", "", basic("admin", "guess2")).status, "still refused")
	require.Equal(t, http.StatusOK, do(t, "GET", p.admin+"/limits", "", adminHdr).status, "the known admin still opens")
	require.Equal(t, http.StatusTooManyRequests, do(t, "GET", p.admin+"/limits", "", basic("ops", adminPw+"2")).status,
		"a login not seen from the address waits, right or wrong: the refusal tells a guesser nothing")
}
