package brokerserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func streamInfo(t *testing.T, ctx context.Context, addr, name string) (msgs int) {
	t.Helper()
	reply, err := brokerserver.JSRequest(ctx, addr, "$JS.API.STREAM.INFO."+name, nil)
	require.NoError(t, err)
	var r struct {
		Error *struct{ Description string } `json:"error"`
		State struct {
			Msgs int `json:"messages"`
		} `json:"state"`
	}
	require.NoError(t, json.Unmarshal(reply, &r), string(reply))
	require.Nil(t, r.Error, string(reply))
	return r.State.Msgs
}

// nats-server starts with JetStream on a loopback port; a stream and its
// messages survive Shutdown and Restart on the same directory and port.
func TestNATSRestartKeepsStreams(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	srv := brokertest.NATS(t)
	require.True(t, strings.HasPrefix(srv.Addr(), "127.0.0.1:"))

	cfg := `{"name":"S","subjects":["s.>"],"storage":"file"}`
	reply, err := brokerserver.JSRequest(ctx, srv.Addr(), "$JS.API.STREAM.CREATE.S", []byte(cfg))
	require.NoError(t, err)
	require.NotContains(t, string(reply), `"error"`)
	// A JetStream publish is a request on the stream's subject.
	reply, err = brokerserver.JSRequest(ctx, srv.Addr(), "s.one", []byte("hello"))
	require.NoError(t, err)
	require.Contains(t, string(reply), `"stream":"S"`)
	require.Equal(t, 1, streamInfo(t, ctx, srv.Addr(), "S"))

	require.NoError(t, srv.Shutdown())
	require.False(t, srv.Running())
	_, err = brokerserver.JSRequest(ctx, srv.Addr(), "$JS.API.INFO", nil)
	require.Error(t, err, "a stopped server answered")

	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, 1, streamInfo(t, ctx, srv.Addr(), "S"))
}

// A RabbitMQ node boots with an epmd of its own, listens for AMQP on
// loopback only, and comes back on the same port after a restart.
func TestRabbitMQStartRestart(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	begin := time.Now()
	srv := brokertest.RabbitMQ(t)
	t.Logf("serving after %v", time.Since(begin))
	require.NoError(t, brokerserver.AMQPHandshake(ctx, srv.Addr()))
	require.Equal(t, "amqp://guest:guest@"+srv.Addr()+"/", srv.URL())
	// The Erlang VM is the process started, so the parent-death signal
	// reaches it: a killed test binary leaves no node behind.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", srv.Pid()))
	require.NoError(t, err)
	require.Contains(t, exe, "beam")

	require.NoError(t, srv.Shutdown())
	require.Error(t, brokerserver.AMQPHandshake(ctx, srv.Addr()))
	begin = time.Now()
	require.NoError(t, srv.Restart(ctx))
	t.Logf("restarted after %v", time.Since(begin))
	require.NoError(t, brokerserver.AMQPHandshake(ctx, srv.Addr()))
}
