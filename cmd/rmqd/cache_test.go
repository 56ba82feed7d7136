package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// twoProcesses is two rmqd services on one Redis under one prefix, as two
// processes behind a load balancer, caching for ttl.
func twoProcesses(t *testing.T, ttl time.Duration) (a, b *env) {
	a = newEnv(t, func(c *service.Config) { c.CacheTTL = ttl })
	b = newEnvOn(t, a.srv, func(c *service.Config) { c.Prefix = a.prefix; c.CacheTTL = ttl })
	return a, b
}

// A token deleted through one process is refused by another that has it
// cached within CacheTTL of the deletion (the documented bound), and at
// once by the process that deleted it.
func TestDeletedTokenRefusedElsewhereWithinCacheTTL(t *testing.T) {
	const ttl = 400 * time.Millisecond
	a, b := twoProcesses(t, ttl)
	tok := a.token("ns")
	peek := func(e *env) answer { return do(t, "GET", e.url("/api/ns/q/peek"), "", "X-Token: "+tok) }
	// b knows the token now: cached.
	requireError(t, peek(b), http.StatusNotFound, "the queue is empty")

	deleted := time.Now()
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", a.admin.URL+"/token/ns/"+tok, "").status)
	requireError(t, peek(a), http.StatusUnauthorized, "invalid token")
	// b may still accept it until its cache entry runs out, never after:
	// polled until it refuses, a peek that starts past the bound must be
	// refused.
	redistest.Poll(t, func() error {
		start := time.Now()
		a := peek(b)
		if a.status == http.StatusUnauthorized {
			return nil
		}
		require.True(t, start.Before(deleted.Add(ttl+10*time.Millisecond)), "accepted past the cache TTL: %s", a)
		return fmt.Errorf("still accepted: %s", a)
	})
	requireError(t, peek(b), http.StatusUnauthorized, "invalid token")
}

// waitLimitSeen waits until e's limit store sees tok's limit as found
// (or not): polled, and a look that starts past bound must see it so.
func waitLimitSeen(t *testing.T, e *env, tok string, found bool, bound time.Time) {
	t.Helper()
	redistest.Poll(t, func() error {
		start := time.Now()
		_, ok, err := e.svc.Limits.Get(context.Background(), names.DefaultPool, "ns", tok)
		require.NoError(t, err)
		if ok == found {
			return nil
		}
		require.True(t, start.Before(bound), "the limit change unseen past the cache TTL")
		return fmt.Errorf("the limit is still found = %v", ok)
	})
}

// A limit set through one process throttles requests through another
// within CacheTTL, and a removed one stops throttling within it too.
func TestLimitChangesReachOtherProcessesWithinCacheTTL(t *testing.T) {
	const ttl = 400 * time.Millisecond
	a, b := twoProcesses(t, ttl)
	tok := a.token("ns")
	publish := func(e *env) answer { return do(t, "PUT", e.url("/api/ns/q"), "x", "X-Token: "+tok) }
	require.Equal(t, http.StatusCreated, publish(b).status) // b caches "no limit"

	set := time.Now()
	require.Equal(t, http.StatusCreated, do(t, "POST", a.admin.URL+"/token/ns/"+tok+"/limit", `{"read":0,"write":1,"interval":60}`).status)
	waitLimitSeen(t, b, tok, true, set.Add(ttl+10*time.Millisecond))
	require.Equal(t, http.StatusCreated, publish(b).status, "the one allowed")
	require.Equal(t, http.StatusTooManyRequests, publish(b).status)
	require.Equal(t, http.StatusTooManyRequests, publish(a).status, "one allowance for both processes")

	removed := time.Now()
	require.Equal(t, http.StatusOK, do(t, "DELETE", a.admin.URL+"/token/ns/"+tok+"/limit", "").status)
	require.Equal(t, http.StatusCreated, publish(a).status)
	waitLimitSeen(t, b, tok, false, removed.Add(ttl+10*time.Millisecond))
	require.Equal(t, http.StatusCreated, publish(b).status)
}
