package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
)

func TestThrottleWrites(t *testing.T) {
	e := newEnv(t)
	tok, other := e.token("ns"), e.token("ns")
	a := do(t, "POST", e.admin.URL+"/token/ns/"+tok+"/limit", `{"read":0,"write":2,"interval":60}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)

	pub := func(tk, path, query, body string) answer {
		return do(t, "PUT", e.url("/api/ns/"+path+query), body, "X-Token: "+tk)
	}
	// Refused requests give their unit back: a 400, a 413, a bad bulk.
	requireError(t, pub(tok, "q", "?tries=0", "x"), http.StatusBadRequest, "tries shouldn't be zero")
	requireError(t, pub(tok, "q", "", strings.Repeat("a", params.MaxJobSize+1)), http.StatusRequestEntityTooLarge, "body too large")
	requireError(t, pub(tok, "q/bulk", "", "[]"), http.StatusBadRequest, "no jobs")
	// A bulk counts as one write, whatever its size.
	require.Equal(t, http.StatusCreated, pub(tok, "q/bulk", "", "[1,2,3]").status)
	require.Equal(t, http.StatusCreated, pub(tok, "q", "", "x").status)
	a = pub(tok, "q", "", "x")
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.JSONEq(t, `{"msg":"token(`+tok+`) produce reach the limit rate, please retry later"}`, string(a.body))
	require.Equal(t, http.StatusTooManyRequests, pub("default:"+tok, "q/bulk", "", "[1]").status, "the prefix names the same token")
	// Other tokens, reads and unthrottled routes are not affected.
	require.Equal(t, http.StatusCreated, pub(other, "q", "", "x").status)
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", e.url("/api/ns/q/job/x"), "", "X-Token: "+tok).status)
	require.Equal(t, 5, e.size("ns", "q")) // 3 + 1 + 1

	// Deleting the limit lifts it at once on this process.
	require.Equal(t, http.StatusOK, do(t, "DELETE", e.admin.URL+"/token/ns/"+tok+"/limit", "").status)
	require.Equal(t, http.StatusCreated, pub(tok, "q", "", "x").status)
	require.Contains(t, string(do(t, "GET", e.admin.URL+"/metrics", "").body), `rmqd_throttled_total{side="write"} 2`)
}

func TestThrottleReads(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	require.Equal(t, http.StatusOK, do(t, "PUT", e.admin.URL+"/token/ns/"+tok+"/limit", `{"read":1,"write":0,"interval":60}`).status)
	// Consumes that end without a job (here 400s) give their unit back.
	for range 3 {
		requireError(t, do(t, "GET", e.url("/api/ns/q?count=0"), "", "X-Token: "+tok), http.StatusBadRequest, "invalid count")
	}
	// Publishing is not limited by the read side.
	for range 3 {
		e.publish(tok, "ns", "q", "", "x")
	}
	a := do(t, "GET", e.url("/api/ns/q"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	a = do(t, "GET", e.url("/api/ns/q"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.JSONEq(t, `{"msg":"token(`+tok+`) consume reach the limit rate, please retry later"}`, string(a.body))
}

// refund.lua reads redis_rate's stored state; this pins the format it
// relies on: giving back every unit taken restores the whole burst, and
// giving back one of several restores exactly one.
func TestRefundRestoresRedisRateAllowance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	th := auth.NewThrottler(e.rdb, e.prefix)
	ref := auth.NewTokenRef(names.DefaultPool, "ns", "tok")
	l := auth.Limit{Read: 3, Interval: 3600}
	take := func() (bool, func(context.Context) error) {
		ok, giveBack, err := th.Take(ctx, ref, l, auth.ReadSide)
		require.NoError(t, err)
		return ok, giveBack
	}
	var backs []func(context.Context) error
	for range 3 {
		ok, gb := take()
		require.True(t, ok)
		backs = append(backs, gb)
	}
	ok, _ := take()
	require.False(t, ok, "the fourth in the window is refused")
	require.NoError(t, backs[0](ctx))
	ok, gb := take()
	require.True(t, ok, "one given back, one more allowed")
	ok, _ = take()
	require.False(t, ok)
	for _, b := range append(backs[1:], gb) {
		require.NoError(t, b(ctx))
	}
	key := "rate:" + th.RateKey(ref, auth.ReadSide)
	require.Zero(t, e.rdb.Exists(ctx, key).Val(), "everything given back: the key is gone")
	res, err := redis_rate.NewLimiter(e.rdb).AllowN(ctx, th.RateKey(ref, auth.ReadSide), redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Hour}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, res.Allowed, "the whole burst is back")
	// The write side and unlimited sides are separate.
	ok, gb, err = th.Take(ctx, ref, l, auth.WriteSide)
	require.NoError(t, err)
	require.True(t, ok)
	require.Nil(t, gb, "write ≤ 0: unlimited, nothing to give back")
}
