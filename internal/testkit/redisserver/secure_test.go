package redisserver_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// A server with requirepass answers only an authenticated client; Restart
// brings it back with the same password.
func TestPasswordServer(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{Password: "s3cret pass"})
	ctx := t.Context()
	require.ErrorContains(t, client(t, s.Addr()).Ping(ctx).Err(), "NOAUTH")
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "s3cret pass", MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Ping(ctx).Err())
	require.NoError(t, s.Restart(ctx))
	require.NoError(t, c.Ping(ctx).Err())
}

// ACL lines replace the default user; the readiness check logs in as
// PingUser.
func TestACLServer(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{
		ACL: []string{
			"user default off",
			"user alice on >wonder ~a:* +@all",
		},
		PingUser: "alice", PingPassword: "wonder",
	})
	ctx := t.Context()
	require.ErrorContains(t, client(t, s.Addr()).Ping(ctx).Err(), "NOAUTH")
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "alice", Password: "wonder", MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Set(ctx, "a:1", "x", 0).Err())
	require.ErrorContains(t, c.Set(ctx, "b:1", "x", 0).Err(), "NOPERM")
	users, err := c.ACLList(ctx).Result()
	require.NoError(t, err)
	require.Len(t, users, 2)
}

// A TLS-only server: plain TCP gets no answer, a client that trusts the
// generated CA gets one.
func TestTLSServer(t *testing.T) {
	t.Parallel()
	files, err := redisserver.WriteTLSFiles(t.TempDir())
	require.NoError(t, err)
	s := start(t, redisserver.Config{TLS: &files})
	ctx := t.Context()
	require.Error(t, client(t, s.Addr()).Ping(ctx).Err())
	tc, err := files.ClientConfig()
	require.NoError(t, err)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: tc, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Ping(ctx).Err())
	require.Equal(t, "0", c.ConfigGet(ctx, "port").Val()["port"])
}
