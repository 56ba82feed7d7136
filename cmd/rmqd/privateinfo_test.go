package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// /info lists every namespace and queue to anyone, as lmstfy's does;
// --private-info puts it behind the admin accounts.
func TestBinaryPrivateInfo(t *testing.T) {
	srv := redistest.Shared(t)
	url := "redis://" + srv.Addr() + "/0"
	open := startRmqd(t, url, []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--admin-account", "admin:"+adminPw)
	require.Equal(t, http.StatusOK, do(t, "GET", open.admin+"/info", "").status, "lmstfy's default: open")
	closed := startRmqd(t, url, []string{"RMQD_PREFIX=" + redistest.Prefix(t), "RMQD_PRIVATE_INFO=true"}, "--admin-account", "admin:"+adminPw)
	require.Equal(t, http.StatusUnauthorized, do(t, "GET", closed.admin+"/info", "").status)
	require.Equal(t, http.StatusOK, do(t, "GET", closed.admin+"/info", "", adminHdr).status)
}
