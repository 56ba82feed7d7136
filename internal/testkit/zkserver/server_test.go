package zkserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/zkserver"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
)

func TestStartAndFourLetterWords(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	srv := zktest.Start(t)
	t.Logf("serving after %v", time.Since(begin))
	require.True(t, strings.HasPrefix(srv.Addr(), "127.0.0.1:"))
	require.True(t, srv.Running())
	require.Equal(t, 100*time.Millisecond, srv.TickTime())
	require.Equal(t, 200*time.Millisecond, srv.MinSessionTimeout())
	require.Equal(t, 2*time.Second, srv.MaxSessionTimeout())

	ctx := t.Context()
	r, err := zkserver.FourLetterWord(ctx, srv.Addr(), "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", r)
	r, err = zkserver.FourLetterWord(ctx, srv.Addr(), "srvr")
	require.NoError(t, err)
	require.Contains(t, r, "Mode: standalone")
	conf, err := zkserver.FourLetterWord(ctx, srv.Addr(), "conf")
	require.NoError(t, err)
	for _, want := range []string{"tickTime=100", "minSessionTimeout=200", "maxSessionTimeout=2000", "maxClientCnxns=0"} {
		require.Contains(t, conf, want)
	}
	// The log is really written: the slf4j binding is on the class path.
	require.Contains(t, srv.LogTail(1000), "binding to port /127.0.0.1:")
}

func TestEphemeralNode(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	owner, _ := zktest.Connect(t, srv, time.Second)
	observer, _ := zktest.Connect(t, srv, time.Second)

	_, err := owner.Create("/lock", []byte("me"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	data, stat, err := observer.Get("/lock")
	require.NoError(t, err)
	require.Equal(t, "me", string(data))
	require.Equal(t, owner.SessionID(), stat.EphemeralOwner)

	// Negotiated timeout: the server granted what we asked within bounds.
	exists, _, gone, err := observer.ExistsW("/lock")
	require.NoError(t, err)
	require.True(t, exists)
	owner.Close() // closing the session deletes its ephemeral nodes at once
	select {
	case ev := <-gone:
		require.Equal(t, zk.EventNodeDeleted, ev.Type)
	case <-time.After(5 * time.Second):
		t.Fatal("ephemeral node survived the closed session")
	}
}

// cuttable lets a test take the network away from one client without
// touching the server, so its session expires on the server side.
type cuttable struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttable) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("network cut by test")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttable) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, conn := range c.conns {
			conn.Close()
		}
		c.conns = nil
	}
}

func TestSessionExpiryIsFast(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	var net cuttable
	owner, events := zktest.Connect(t, srv, 400*time.Millisecond, zk.WithDialer(net.dial))
	observer, _ := zktest.Connect(t, srv, 2*time.Second)
	oldSession := owner.SessionID()

	_, err := owner.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, _, gone, err := observer.ExistsW("/eph")
	require.NoError(t, err)

	begin := time.Now()
	net.setCut(true)
	select {
	case ev := <-gone:
		require.Equal(t, zk.EventNodeDeleted, ev.Type)
	case <-time.After(10 * time.Second):
		t.Fatal("session did not expire")
	}
	took := time.Since(begin)
	t.Logf("ephemeral node of a 400 ms session gone %v after the network cut", took)
	require.Less(t, took, 3*time.Second)

	// The client learns about the expiry only when it gets through again,
	// and then quietly opens a new session.
	net.setCut(false)
	sawExpired := false
	deadline := time.After(10 * time.Second)
	for !sawExpired || owner.State() != zk.StateHasSession {
		select {
		case ev := <-events:
			if ev.State == zk.StateExpired {
				sawExpired = true
			}
		case <-deadline:
			t.Fatalf("expired=%v state=%v", sawExpired, owner.State())
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.NotEqual(t, oldSession, owner.SessionID())
}

func TestKillRestartKeepsDataAndSessions(t *testing.T) {
	t.Parallel()
	// A long session so that it outlives the restart even on a busy machine
	// (a full suite's builds and tests beside it: the client took over 15 s
	// to get an answer again there).
	srv := zktest.StartConfig(t, zkserver.Config{MaxSessionTimeout: 40 * time.Second})
	require.Equal(t, 40*time.Second, srv.MaxSessionTimeout())
	conn, _ := zktest.Connect(t, srv, 40*time.Second)
	session := conn.SessionID()
	port, pid := srv.Port(), srv.Pid()

	_, err := conn.Create("/persistent", []byte("p"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = conn.Create("/ephemeral", []byte("e"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	for _, stop := range []struct {
		name string
		fn   func() error
	}{{"kill", srv.Kill}, {"shutdown", srv.Shutdown}} {
		begin := time.Now()
		require.NoError(t, stop.fn(), stop.name)
		require.False(t, srv.Running())
		require.NoError(t, srv.Restart(t.Context()))
		t.Logf("%s + restart took %v", stop.name, time.Since(begin))
		require.Equal(t, port, srv.Port())
		require.NotEqual(t, pid, srv.Pid())

		// The client may have tried every server while this one was down
		// and failed its queued request (zk.ErrNoServer): it reconnects on
		// its own, with the same session, so the read is tried again.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			data, _, err := conn.Get("/persistent")
			if assert.NoError(c, err) {
				assert.Equal(c, "p", string(data))
			}
		}, 35*time.Second, 50*time.Millisecond)
		_, stat, err := conn.Get("/ephemeral")
		require.NoError(t, err, "the session should have survived the %s", stop.name)
		require.Equal(t, session, stat.EphemeralOwner)
		require.Equal(t, session, conn.SessionID())
	}
}

func TestSuspendResume(t *testing.T) {
	t.Parallel()
	srv := zktest.Start(t)
	ctx := t.Context()
	require.NoError(t, srv.Suspend())
	require.True(t, srv.Suspended())
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := zkserver.FourLetterWord(short, srv.Addr(), "ruok")
	cancel()
	require.Error(t, err, "a suspended server answered")
	require.NoError(t, srv.Resume())
	require.False(t, srv.Suspended())
	r, err := zkserver.FourLetterWord(ctx, srv.Addr(), "ruok")
	require.NoError(t, err)
	require.Equal(t, "imok", r)

	require.NoError(t, srv.Suspend())
	begin := time.Now()
	require.NoError(t, srv.Stop(), "Stop of a suspended server")
	require.Less(t, time.Since(begin), 5*time.Second)
}

func TestStopIsIdempotentAndRemovesTempDir(t *testing.T) {
	t.Parallel()
	srv, err := zkserver.Start(t.Context(), zkserver.Config{})
	require.NoError(t, err)
	dir := srv.Dir()
	require.FileExists(t, dir+"/zoo.cfg")
	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop())
	require.NoDirExists(t, dir)
	require.Error(t, srv.Restart(t.Context()))
}

func TestGivenDirPortAndTick(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := zktest.StartConfig(t, zkserver.Config{Dir: dir, Port: port, TickTime: 50 * time.Millisecond})
	require.Equal(t, port, srv.Port())
	require.Equal(t, 100*time.Millisecond, srv.MinSessionTimeout())
	conf, err := zkserver.FourLetterWord(t.Context(), srv.Addr(), "conf")
	require.NoError(t, err)
	require.Contains(t, conf, "tickTime=50\n")
	require.NoError(t, srv.Stop())
	require.DirExists(t, dir+"/version-2")
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	begin := time.Now()
	_, err = zkserver.Start(t.Context(), zkserver.Config{Port: l.Addr().(*net.TCPAddr).Port})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.Less(t, time.Since(begin), 2*time.Second, "no JVM should be started for a taken port")
}

func TestShared(t *testing.T) {
	t.Parallel()
	a := zktest.Shared(t)
	require.Same(t, a, zktest.Shared(t))
	conn, _ := zktest.Connect(t, a, time.Second)
	// A shared server outlives one run of the test (-count=N): unique paths.
	path := fmt.Sprintf("/shared-%s-%d", t.Name(), time.Now().UnixNano())
	_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
}

func TestLookPath(t *testing.T) {
	java, cp, err := zkserver.LookPath()
	require.NoError(t, err)
	require.NotEmpty(t, java)
	require.Contains(t, cp, "/usr/share/java/zookeeper.jar")
	require.NoError(t, zkserver.EnsureInstalled(t.Context(), t.Logf))

	t.Setenv("PATH", t.TempDir())
	_, _, err = zkserver.LookPath()
	require.ErrorIs(t, err, zkserver.ErrNotInstalled)
}

func TestMain(m *testing.M) { zktest.VerifyTestMain(m) }
