// Package redisserver runs real redis-server processes (a single node or a
// six-node cluster) on loopback ports for tests and demo programs.
//
// It does not import package testing so that example programs can use it;
// the test helpers live in internal/testkit/redistest.
package redisserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// readyTimeout bounds the wait for PING when the caller's context has no
	// earlier deadline. A node with a small data set answers within ~50 ms.
	readyTimeout = 10 * time.Second
	// stopGrace is how long a SIGTERM may take before SIGKILL. Redis writes
	// its AOF/RDB on SIGTERM, which is quick for test data.
	stopGrace = 10 * time.Second
	// startAttempts covers losing the race for a free port to another process.
	startAttempts = 5
)

// Config describes one redis-server.
type Config struct {
	// Dir is the working directory (AOF, RDB, nodes.conf, log). If empty a
	// temporary directory is created and removed by Stop.
	Dir string
	// Port to listen on; 0 picks a free one.
	Port int
	// AppendOnly turns the AOF on, for durability tests.
	AppendOnly bool
	// AppendFsync is "always", "everysec" or "no"; empty keeps Redis's
	// default (everysec).
	AppendFsync string
	// ExtraArgs are appended to the command line, e.g. "--maxmemory", "10mb".
	ExtraArgs []string
	// Password, ACL, PingUser, PingPassword and TLS are for single nodes:
	// StartCluster does not pass them on, since redis-cli --cluster create
	// and the readiness checks of a cluster log in as the default user. A
	// cluster gets an extra ACL user with ExtraArgs: "--user", "NAME",
	// "on", ">PASSWORD", rules...
	//
	// Password, if set, is requirepass: the password of the default user.
	// The readiness check authenticates with it unless PingUser is set.
	Password string
	// ACL, if set, is written to users.acl in Dir and loaded with --aclfile:
	// one "user NAME RULES..." line each, as in an ACL file. A line for
	// "default" replaces the default user ("user default off" disables it).
	// Use it or Password, not both.
	ACL []string
	// PingUser and PingPassword are the credentials of the readiness check
	// when the default user cannot PING (disabled by ACL, or given a
	// password there).
	PingUser, PingPassword string
	// TLS, if set, makes the server speak TLS only, on the server's port
	// (--port 0, --tls-port); clients need not present a certificate. The
	// readiness check verifies the server against TLS.CAFile, so the
	// certificate must be valid for 127.0.0.1 (see WriteTLSFiles).
	TLS *TLSFiles
	// Logf, if set, receives lifecycle messages. It is only called from
	// within the methods of this package, never from a background goroutine,
	// so testing.TB.Logf is safe to pass.
	Logf func(format string, args ...any)
}

// Server is a running (or stopped) redis-server process.
type Server struct {
	bin     string
	cfg     Config
	dir     string
	ownsDir bool
	port    int

	// cluster mode: set by StartCluster.
	cluster     bool
	busPort     int
	nodeTimeout time.Duration

	procutil.Runner // Stop, Shutdown, Kill, Restart, Suspend, Resume ...
}

// Start launches redis-server and returns once it answers PING.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	return start(ctx, cfg, nil)
}

type clusterOpts struct {
	nodeTimeout time.Duration
}

func start(ctx context.Context, cfg Config, co *clusterOpts) (*Server, error) {
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, cfg: cfg, dir: cfg.Dir}
	if co != nil {
		s.cluster = true
		s.nodeTimeout = co.nodeTimeout
	}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "redisserver-")
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		s.dir, s.ownsDir = d, true
	} else {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		abs, err := filepath.Abs(s.dir)
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		s.dir = abs
	}

	s.Init(procutil.RunnerConfig{
		Name: "redisserver", Grace: stopGrace, Addr: s.Addr, Logf: s.logf,
		Launch: s.launch, BeforeRestart: nil,
	}, s.dir, s.ownsDir)

	var lastErr error
	for attempt := range startAttempts {
		if cfg.Port == 0 {
			if s.port, err = procutil.FreePort(); err != nil {
				break
			}
		} else {
			s.port = cfg.Port
			if attempt > 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if s.cluster {
			if s.busPort, err = procutil.FreePort(); err != nil {
				break
			}
		}
		lastErr = s.Launch(ctx)
		if lastErr == nil {
			s.logf("redisserver: started %s (pid %d, dir %s)", s.Addr(), s.Pid(), s.dir)
			return s, nil
		}
		if !procutil.IsAddrInUse(lastErr) || ctx.Err() != nil {
			break
		}
		s.logf("redisserver: port %d or %d taken, retrying", s.port, s.busPort)
	}
	if err == nil {
		err = lastErr
	}
	s.Abandon()
	return nil, fmt.Errorf("redisserver: start on port %d: %w", s.port, err)
}

func (s *Server) args() []string {
	appendOnly := "no"
	if s.cfg.AppendOnly {
		appendOnly = "yes"
	}
	port := []string{"--port", strconv.Itoa(s.port)}
	if t := s.cfg.TLS; t != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", t.CertFile, "--tls-key-file", t.KeyFile, "--tls-ca-cert-file", t.CAFile,
			"--tls-auth-clients", "no"}
	}
	a := append(port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", appendOnly,
		"--dir", s.dir,
		"--daemonize", "no",
		// DEBUG SLEEP and friends are refused without it.
		"--enable-debug-command", "local",
		// Replicas (cluster, or REPLICAOF in a test) would otherwise wait 5 s
		// for more replicas before the first full sync starts.
		"--repl-diskless-sync-delay", "0",
	)
	if s.cfg.Password != "" {
		a = append(a, "--requirepass", s.cfg.Password)
	}
	if len(s.cfg.ACL) > 0 {
		a = append(a, "--aclfile", s.aclPath())
	}
	if s.cluster {
		// CLUSTER SLOTS hides a replica until its replication offset is
		// non-zero, and on an idle master the offset only moves with the
		// master's PING to its replicas, every 10 s by default.
		a = append(a, "--repl-ping-replica-period", "1")
	}
	if s.cfg.AppendFsync != "" {
		a = append(a, "--appendfsync", s.cfg.AppendFsync)
	}
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, fmt.Sprintf("nodes-%d.conf", s.port)),
			"--cluster-node-timeout", strconv.FormatInt(s.nodeTimeout.Milliseconds(), 10),
			// An explicit bus port: the default port+10000 can exceed 65535
			// for ports from the kernel's ephemeral range and may be taken.
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.cfg.ExtraArgs...)
}

// launch starts the process and waits for PING.
func (s *Server) launch(ctx context.Context) (*procutil.Proc, error) {
	addr := s.Addr()
	if len(s.cfg.ACL) > 0 {
		// Written at every launch, so a Restart sees the configured users
		// even if a test rewrote the file.
		acl := strings.Join(s.cfg.ACL, "\n") + "\n"
		if err := os.WriteFile(s.aclPath(), []byte(acl), 0o600); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
	}
	p := pinger{addr: addr, user: s.cfg.PingUser, password: s.cfg.PingPassword}
	if p.user == "" {
		p.password = s.cfg.Password
	}
	if s.cfg.TLS != nil {
		tc, err := s.cfg.TLS.ClientConfig()
		if err != nil {
			return nil, err
		}
		p.tls = tc
	}
	return procutil.StartReady(ctx, s.bin, s.args(), s.dir, s.LogPath(), readyTimeout, 20*time.Millisecond,
		"PONG from "+addr, p.ping)
}

func (s *Server) aclPath() string { return filepath.Join(s.dir, "users.acl") }

// pinger is the readiness check: AUTH if credentials are given, then PING,
// over TLS if the server speaks it.
type pinger struct {
	addr           string
	user, password string
	tls            *tls.Config
}

// ping speaks raw RESP instead of using go-redis, whose retries and
// connection pool would blur what "ready" means. -LOADING while the AOF is
// replayed does not count as ready.
func (p pinger) ping(ctx context.Context) error {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		c = tc
	}
	var req []byte
	want := []string{"+PONG"}
	switch {
	case p.user != "":
		req = resp("AUTH", p.user, p.password)
		want = []string{"+OK", "+PONG"}
	case p.password != "":
		req = resp("AUTH", p.password)
		want = []string{"+OK", "+PONG"}
	}
	if _, err := c.Write(append(req, resp("PING")...)); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for _, w := range want {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line = strings.TrimSpace(line); line != w {
			return errors.New(line)
		}
	}
	return nil
}

// resp encodes a command as a RESP array, so passwords may hold any byte.
func resp(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// Addr is "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the client port.
func (s *Server) Port() int { return s.port }

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// LogPath is the file that receives the server's stdout and stderr, across
// restarts.
func (s *Server) LogPath() string { return filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", s.port)) }

// LogTail returns the last n lines of the log, for failure messages.
func (s *Server) LogTail(n int) string { return procutil.LogTail(s.LogPath(), 0, n) }

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}
