package redisserver_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

func start(t *testing.T, cfg redisserver.Config) *redisserver.Server {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	s, err := redisserver.Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", s.Addr(), s.LogTail(40))
		}
		require.NoError(t, s.Stop())
	})
	return s
}

func client(t *testing.T, addr string) *redis.Client {
	// No retries: a test must see the error of the attempt it made, not a
	// silent second try.
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStartPingSetGet(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{})
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(s.Port()), s.Addr())
	require.True(t, s.Running())
	require.NotZero(t, s.Pid())

	ctx := t.Context()
	c := client(t, s.Addr())
	require.Equal(t, "PONG", c.Ping(ctx).Val())
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(ctx, "k").Val())

	// --save "" and appendonly no: a test server must not write to disk
	// behind our back.
	cfg := c.ConfigGet(ctx, "*").Val()
	require.Equal(t, "", cfg["save"])
	require.Equal(t, "no", cfg["appendonly"])
	require.Equal(t, "127.0.0.1", cfg["bind"])
}

func TestDebugCommandEnabled(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{})
	c := client(t, s.Addr())
	begin := time.Now()
	require.NoError(t, c.Do(t.Context(), "DEBUG", "SLEEP", "0.2").Err())
	require.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond)
}

func TestKillRestartKeepsAOFData(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	ctx := t.Context()
	c := client(t, s.Addr())
	for i := range 100 {
		require.NoError(t, c.RPush(ctx, "list", i).Err())
	}
	port, pid := s.Port(), s.Pid()

	require.NoError(t, s.Kill())
	require.False(t, s.Running())
	require.Error(t, c.Ping(ctx).Err(), "killed server still answers")

	require.NoError(t, s.Restart(ctx))
	require.Equal(t, port, s.Port())
	require.NotEqual(t, pid, s.Pid())
	require.Equal(t, int64(100), c.LLen(ctx, "list").Val())
	require.Equal(t, "99", c.LIndex(ctx, "list", -1).Val())
}

func TestKillRestartWithoutAOFLosesData(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{})
	ctx := t.Context()
	c := client(t, s.Addr())
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart(ctx))
	require.Equal(t, int64(0), c.Exists(ctx, "k").Val())
}

func TestShutdownRestart(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{AppendOnly: true})
	ctx := t.Context()
	c := client(t, s.Addr())
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Shutdown())
	require.False(t, s.Running())
	// Restart also works on a running server.
	require.NoError(t, s.Restart(ctx))
	require.NoError(t, s.Restart(ctx))
	require.Equal(t, "v", c.Get(ctx, "k").Val())
}

func TestStopIsIdempotentAndRemovesTempDir(t *testing.T) {
	t.Parallel()
	s, err := redisserver.Start(t.Context(), redisserver.Config{})
	require.NoError(t, err)
	dir := s.Dir()
	require.DirExists(t, dir)
	require.FileExists(t, s.LogPath())
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop())
	require.NoDirExists(t, dir)
	require.Error(t, s.Restart(t.Context()))
	require.NoError(t, s.Kill())
}

func TestGivenDirAndPortAreKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	s := start(t, redisserver.Config{Dir: dir, Port: port, AppendOnly: true})
	require.Equal(t, port, s.Port())
	require.Equal(t, dir, s.Dir())
	require.NoError(t, s.Stop())
	require.DirExists(t, dir)
	require.FileExists(t, s.LogPath())
	log, err := os.ReadFile(s.LogPath())
	require.NoError(t, err)
	require.Contains(t, string(log), "Ready to accept connections")
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = redisserver.Start(t.Context(), redisserver.Config{Port: port})
	require.ErrorContains(t, err, "Address already in use")
}

func TestBadArgsShowLogTail(t *testing.T) {
	t.Parallel()
	_, err := redisserver.Start(t.Context(), redisserver.Config{ExtraArgs: []string{"--no-such-option", "1"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "no-such-option")
}

func TestSuspendResume(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Config{})
	ctx := t.Context()
	c := client(t, s.Addr())
	require.NoError(t, c.Ping(ctx).Err())

	require.NoError(t, s.Suspend())
	require.True(t, s.Suspended())
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := c.Ping(short).Err()
	cancel()
	require.Error(t, err, "suspended server answered")

	require.NoError(t, s.Resume())
	require.False(t, s.Suspended())
	require.NoError(t, c.Ping(ctx).Err())

	// Stop must not hang on a suspended server.
	require.NoError(t, s.Suspend())
	begin := time.Now()
	require.NoError(t, s.Stop())
	require.Less(t, time.Since(begin), 5*time.Second)
}

func TestLookPathMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisserver.LookPath()
	require.ErrorIs(t, err, redisserver.ErrNotInstalled)
	require.ErrorContains(t, err, "redisserver: redis-server not found in PATH (apt-get install redis-server)")
	_, err = redisserver.Start(t.Context(), redisserver.Config{})
	require.ErrorIs(t, err, redisserver.ErrNotInstalled)
	_, err = redisserver.StartCluster(t.Context(), redisserver.ClusterConfig{})
	require.ErrorIs(t, err, redisserver.ErrNotInstalled)
}

func TestEnsureInstalledWhenPresent(t *testing.T) {
	t.Parallel()
	require.NoError(t, redisserver.EnsureInstalled(t.Context(), t.Logf))
}

func TestKeySlot(t *testing.T) {
	t.Parallel()
	// Values from the Redis cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]int{
		"123456789":            12739,
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": redisserver.KeySlot("user1000"),
		"foo{}{bar}":           redisserver.KeySlot("foo{}{bar}"),
		"{}x":                  redisserver.KeySlot("{}x"),
	} {
		require.Equal(t, want, redisserver.KeySlot(key), key)
	}
	require.NotEqual(t, redisserver.KeySlot("foo{}{bar}"), redisserver.KeySlot("bar"))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
