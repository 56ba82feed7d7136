package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func TestNewRedisParsesURLs(t *testing.T) {
	c, err := newRedis("redis://u:p@127.0.0.1:1/3", false, nil)
	require.NoError(t, err)
	one, ok := c.(*redis.Client)
	require.True(t, ok)
	require.Equal(t, "127.0.0.1:1", one.Options().Addr)
	require.Equal(t, 3, one.Options().DB)
	require.Equal(t, "p", one.Options().Password)
	require.Nil(t, one.Options().TLSConfig)
	one.Close()

	c, err = newRedis("rediss://127.0.0.1:2/0", false, nil)
	require.NoError(t, err)
	require.NotNil(t, c.(*redis.Client).Options().TLSConfig, "rediss:// is TLS")
	c.Close()

	c, err = newRedis("redis://127.0.0.1:1, 127.0.0.1:2,redis://127.0.0.1:3", false, nil)
	require.NoError(t, err)
	cl, ok := c.(*redis.ClusterClient)
	require.True(t, ok, "a list is a cluster")
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, cl.Options().Addrs)
	cl.Close()

	c, err = newRedis("redis://127.0.0.1:1?addr=127.0.0.1:2", true, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, c.(*redis.ClusterClient).Options().Addrs)
	c.Close()

	_, err = newRedis("http://u:secret@x:1", false, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
}

// The same service on a Redis Cluster: every key rmqd and its queues use
// stays within one hash slot per call.
func TestOnACluster(t *testing.T) {
	cl := redistest.SharedCluster(t)
	rdb := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	log := &syncBuffer{}
	ctx := context.Background()
	svc, err := service.New(ctx, service.Config{Prefix: prefix, MaxWait: waitLong},
		map[string]redis.UniversalClient{names.DefaultPool: rdb}, slog.New(slog.NewTextHandler(log, nil)))
	require.NoError(t, err)
	api, admin := httptest.NewServer(api.Handler(svc)), httptest.NewServer(admin.Handler(svc))
	defer func() {
		api.Close()
		admin.Close()
		require.NoError(t, svc.Close(ctx))
		if t.Failed() {
			t.Logf("rmqd log:\n%s", log.String())
		}
	}()
	e := &env{t: t, prefix: prefix, svc: svc, api: api, admin: admin, log: log}
	tok := e.token("ns")
	require.Equal(t, http.StatusOK, do(t, "PUT", admin.URL+"/token/ns/"+tok+"/limit", `{"write":3,"read":0,"interval":60}`).status)
	for _, q := range []string{"q1", "q2", strings.Repeat("q", 200)} {
		e.publish(tok, "ns", q, "", "x")
	}
	require.Equal(t, http.StatusTooManyRequests, do(t, "PUT", api.URL+"/api/ns/q1", "x", "X-Token: "+tok).status)
	require.Equal(t, 1, e.size("ns", "q2"))
	var head encode.JobBody
	do(t, "GET", api.URL+"/api/ns/q1/peek", "", "X-Token: "+tok).json(t, &head)
	require.Equal(t, "x", string(head.Data))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", api.URL+"/api/ns/q1", "", "X-Token: "+tok).status)
	require.Equal(t, 0, e.size("ns", "q1"))
	a := do(t, "GET", api.URL+"/api/ns/q2/deadletter", "", "X-Token: "+tok)
	require.JSONEq(t, `{"namespace":"ns","queue":"q2","deadletter_size":0,"deadletter_head":""}`, string(a.body))
	a = do(t, "GET", admin.URL+"/info", "")
	require.JSONEq(t, `{"ns":["q1","q2","`+strings.Repeat("q", 200)+`"]}`, string(a.body))
}
