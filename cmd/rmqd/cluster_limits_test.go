package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// clusterService starts an rmqd service on rdb (a cluster client) under
// prefix, as one of several behind a load balancer.
func clusterService(t *testing.T, rdb redis.UniversalClient, prefix string) *env {
	t.Helper()
	log := &syncBuffer{}
	ctx := context.Background()
	svc, err := service.New(ctx, service.Config{Prefix: prefix, MaxWait: waitLong},
		map[string]redis.UniversalClient{names.DefaultPool: rdb}, slog.New(slog.NewTextHandler(log, nil)))
	require.NoError(t, err)
	api, admin := httptest.NewServer(api.Handler(svc)), httptest.NewServer(admin.Handler(svc))
	t.Cleanup(func() {
		api.Close()
		admin.Close()
		require.NoError(t, svc.Close(ctx))
		if t.Failed() {
			t.Logf("rmqd log:\n%s", log.String())
		}
	})
	return &env{t: t, prefix: prefix, svc: svc, api: api, admin: admin, log: log}
}

// Two rmqd behind a load balancer on a cluster, a queue limited to one
// job in flight: a job consumed through one and deleted through the
// other gives its place back, so the next consume through either gets
// the next job.
func TestClusterQueueConcurrencyAcrossServices(t *testing.T) {
	cl := redistest.SharedCluster(t)
	prefix := redistest.Prefix(t)
	a := clusterService(t, redistest.ClusterClient(t, cl), prefix)
	b := clusterService(t, redistest.ClusterClient(t, cl), prefix)
	tok := a.token("ns")
	a.publish(tok, "ns", "q", "", "one")
	a.publish(tok, "ns", "q", "", "two")
	require.Equal(t, http.StatusOK, do(t, "PUT", a.admin.URL+"/queue/ns/q/limits", `{"concurrency":1}`).status)

	j1 := a.consumeJob(tok, "/api/ns/q?ttr=120")
	requireNoJob(t, do(t, "GET", b.url("/api/ns/q?ttr=120"), "", "X-Token: "+tok))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", b.url("/api/ns/q/job/"+j1.JobID), "", "X-Token: "+tok).status)
	j2 := b.consumeJob(tok, "/api/ns/q?ttr=120")
	require.NotEqual(t, j1.JobID, j2.JobID)
	requireNoJob(t, do(t, "GET", a.url("/api/ns/q?ttr=120"), "", "X-Token: "+tok))
}
