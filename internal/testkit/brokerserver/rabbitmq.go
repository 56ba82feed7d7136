package brokerserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/procutil"
)

const (
	// rabbitReadyTimeout bounds the wait for the AMQP listener: 8-11 s on
	// a first start here, 7-8 s on a restart, more under a -race run.
	rabbitReadyTimeout = 90 * time.Second
	// rabbitStopGrace: a SIGTERM stops the node in 1-3 s.
	rabbitStopGrace = 30 * time.Second
	// The start script lives beside Debian's wrapper, which would switch
	// to the rabbitmq user, its HOME and its Erlang cookie.
	rabbitScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"
)

// RabbitMQConfig describes one throwaway RabbitMQ node.
type RabbitMQConfig struct {
	// Dir holds the node's home (Erlang cookie), mnesia database, logs and
	// configuration. If empty a temporary directory is created and removed
	// by Stop.
	Dir string
	// Port is the AMQP port; 0 picks a free one.
	Port int
	// Logf, if set, receives lifecycle messages; it is only called from
	// this package's methods, so testing.TB.Logf is safe.
	Logf func(format string, args ...any)
}

// RabbitMQ is a running (or stopped) RabbitMQ node with an epmd of its
// own. The node's data survives Shutdown, Kill and Restart; Stop ends both
// processes for good.
type RabbitMQ struct {
	cfg      RabbitMQConfig
	dir      string
	ownsDir  bool
	port     int // AMQP
	distPort int // Erlang distribution
	epmdPort int
	epmd     *procutil.Proc

	procutil.Runner // Shutdown, Kill, Restart, Suspend, Resume ...
}

// LookRabbitMQ checks that the RabbitMQ start script and epmd are there.
func LookRabbitMQ() (epmd string, err error) {
	if _, err := os.Stat(rabbitScript); err != nil {
		return "", fmt.Errorf("brokerserver: %s not found (apt-get install rabbitmq-server): %w", rabbitScript, ErrNotInstalled)
	}
	epmd, err = exec.LookPath("epmd")
	if err != nil {
		return "", fmt.Errorf("brokerserver: epmd not found in PATH (apt-get install rabbitmq-server brings erlang): %w", ErrNotInstalled)
	}
	return epmd, nil
}

// StartRabbitMQ launches epmd and a RabbitMQ node, and returns once the
// node accepts AMQP connections (user guest, password guest, vhost /).
func StartRabbitMQ(ctx context.Context, cfg RabbitMQConfig) (*RabbitMQ, error) {
	epmdBin, err := LookRabbitMQ()
	if err != nil {
		return nil, err
	}
	s := &RabbitMQ{cfg: cfg}
	if s.dir, s.ownsDir, err = serverDir(cfg.Dir, "rabbitmq-"); err != nil {
		return nil, err
	}
	s.Init(procutil.RunnerConfig{
		Name: "rabbitmq", Grace: rabbitStopGrace, Addr: s.Addr, Logf: s.logf,
		Launch: s.launch, BeforeRestart: func() error { return portFree(s.port) },
	}, s.dir, s.ownsDir)
	fail := func(err error) (*RabbitMQ, error) {
		if s.epmd != nil {
			_ = s.epmd.Terminate(5 * time.Second)
		}
		s.Abandon()
		return nil, fmt.Errorf("rabbitmq: start on port %d: %w", s.port, err)
	}
	for _, d := range []string{"home", "mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return fail(err)
		}
	}
	// A node started without an epmd of its own would start a daemon epmd
	// on 4369 that outlives it; ours runs in the foreground and dies with
	// the test binary.
	if s.epmdPort, err = procutil.FreePort(); err != nil {
		return fail(err)
	}
	s.epmd, err = procutil.StartReady(ctx, epmdBin, []string{"-port", strconv.Itoa(s.epmdPort), "-address", "127.0.0.1"},
		s.dir, filepath.Join(s.dir, "epmd.log"), 10*time.Second, 10*time.Millisecond, "epmd listening",
		func(ctx context.Context) error {
			return dialOnce(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(s.epmdPort)))
		})
	if err != nil {
		return fail(err)
	}
	var lastErr error
	for attempt := range startAttempts {
		if s.port, err = pickPort(cfg.Port, attempt); err != nil {
			break
		}
		if s.distPort, err = procutil.FreePort(); err != nil {
			break
		}
		if err = s.writeConfig(); err != nil {
			break
		}
		if lastErr = s.Launch(ctx); lastErr == nil {
			s.logf("rabbitmq: started %s (pid %d, dir %s, epmd %d)", s.Addr(), s.Pid(), s.dir, s.epmdPort)
			return s, nil
		}
		if !addrInUse(lastErr) || ctx.Err() != nil || cfg.Port != 0 {
			break
		}
		s.logf("rabbitmq: port %d or %d taken, retrying", s.port, s.distPort)
	}
	if err == nil {
		err = lastErr
	}
	return fail(err)
}

func (s *RabbitMQ) confPath() string { return filepath.Join(s.dir, "rabbitmq.conf") }

func (s *RabbitMQ) writeConfig() error {
	conf := strings.Join([]string{
		"listeners.tcp.1 = 127.0.0.1:" + strconv.Itoa(s.port),
		// guest may log in from 127.0.0.1 only by default; the tests
		// connect from there, but say it so no reader wonders.
		"loopback_users = none",
		// A test machine's disk may be nearly full of other people's
		// builds; the default 50 MB alarm would block publishers.
		"disk_free_limit.absolute = 1MB",
		"log.console = false",
		"log.file.level = info",
	}, "\n") + "\n"
	files := map[string]string{
		s.confPath():                            conf,
		filepath.Join(s.dir, "enabled_plugins"): "[].\n",
		// An empty env file keeps /etc/rabbitmq/rabbitmq-env.conf out.
		filepath.Join(s.dir, "rabbitmq-env.conf"): "",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// env is the node's environment; /usr/bin/env passes it and execs the
// start script, so the process we signal is the script itself.
func (s *RabbitMQ) env() []string {
	return []string{
		"HOME=" + filepath.Join(s.dir, "home"),
		"ERL_EPMD_PORT=" + strconv.Itoa(s.epmdPort),
		"RABBITMQ_NODENAME=rabbit" + strconv.Itoa(s.port) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(s.port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(s.distPort),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(s.dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + s.confPath(),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(s.dir, "enabled_plugins"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(s.dir, "rabbitmq-env.conf"),
		// Without it the distribution port listens on every address.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	}
}

func (s *RabbitMQ) launch(ctx context.Context) (*procutil.Proc, error) {
	// With NOTIFY_SOCKET set the script execs erl instead of running it in
	// the background and waiting: the Erlang VM is then the process we
	// started, so the parent-death signal that procutil asks for reaches
	// it, and a test binary that dies leaves no node behind (nor the epmd
	// daemon an orphaned node starts on every address). Nothing listens
	// on the socket; the node's readiness message to it is lost. An
	// inherited RABBITMQ_ALLOW_INPUT would give the node a shell on stdin,
	// which stops it when stdin closes.
	args := append(append([]string{"-u", "RABBITMQ_ALLOW_INPUT"}, s.env()...),
		"NOTIFY_SOCKET="+filepath.Join(s.dir, "no-systemd.sock"), rabbitScript)
	addr := s.Addr()
	return procutil.StartReady(ctx, "/usr/bin/env", args, s.dir, s.LogPath(), rabbitReadyTimeout, 100*time.Millisecond,
		"AMQP on "+addr, func(ctx context.Context) error { return AMQPHandshake(ctx, addr) })
}

// AMQPHandshake checks that an AMQP 0-9-1 server listens at addr: it sends
// the protocol header and expects connection.start back. RabbitMQ opens
// its listener only once the node has booted, so this is the readiness an
// AMQP dial would see.
func AMQPHandshake(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return err
	}
	// Frame: type(1) channel(2) size(4), then class(2) method(2).
	var hdr [11]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return fmt.Errorf("no connection.start: %w", err)
	}
	if bytes.HasPrefix(hdr[:], []byte("AMQP")) {
		return fmt.Errorf("server refused protocol 0-9-1: %q", hdr[:8])
	}
	class, method := binary.BigEndian.Uint16(hdr[7:9]), binary.BigEndian.Uint16(hdr[9:11])
	if hdr[0] != 1 || class != 10 || method != 10 {
		return fmt.Errorf("expected connection.start, got frame type %d class %d method %d", hdr[0], class, method)
	}
	return nil
}

func dialOnce(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Stop shuts the node down, then its epmd, and removes the directory if
// StartRabbitMQ created it. Idempotent; no Restart afterwards.
func (s *RabbitMQ) Stop() error {
	err := s.Runner.Stop()
	if s.epmd != nil {
		if eerr := s.epmd.Terminate(5 * time.Second); err == nil {
			err = eerr
		}
	}
	return err
}

// Addr is "127.0.0.1:port", the AMQP listener.
func (s *RabbitMQ) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the AMQP URL of the default vhost as guest.
func (s *RabbitMQ) URL() string { return "amqp://guest:guest@" + s.Addr() + "/" }

// Port is the AMQP port.
func (s *RabbitMQ) Port() int { return s.port }

// Dir is the node's directory.
func (s *RabbitMQ) Dir() string { return s.dir }

// LogPath is the file receiving the start script's output; the node's own
// log is under log/.
func (s *RabbitMQ) LogPath() string { return filepath.Join(s.dir, "rabbitmq-server.out") }

// LogTail returns the last n lines of the start script's output and of the
// node's log, for failure messages.
func (s *RabbitMQ) LogTail(n int) string {
	out := procutil.LogTail(s.LogPath(), 0, n)
	logs, _ := filepath.Glob(filepath.Join(s.dir, "log", "*.log"))
	for _, l := range logs {
		out += "\n--- " + filepath.Base(l) + "\n" + procutil.LogTail(l, 0, n)
	}
	return out
}

func (s *RabbitMQ) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}
