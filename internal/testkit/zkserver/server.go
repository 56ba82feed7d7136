// Package zkserver runs a real standalone ZooKeeper (Debian's zookeeper
// package, 3.8) on a loopback port for tests and demo programs.
//
// The default tick time is 100 ms, so ZooKeeper grants session timeouts
// between 200 ms (2 ticks) and 2 s (20 ticks) unless MinSessionTimeout or
// MaxSessionTimeout say otherwise: a client asking for 10 s silently gets
// 2 s, and session-expiry tests finish quickly. Expiry is checked once per
// tick, so a session ends between its timeout and timeout+tick after the
// server last heard from the client.
//
// It does not import package testing; see package zktest for test helpers.
package zkserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultTickTime is used when Config.TickTime is 0.
	DefaultTickTime = 100 * time.Millisecond
	// readyTimeout bounds the wait for a serving server when the caller's
	// context has no earlier deadline. A JVM start takes about 1 s here, more
	// under a loaded -race test run.
	readyTimeout = 30 * time.Second
	// stopGrace is how long SIGTERM may take before SIGKILL; ZooKeeper needs
	// about 0.3 s.
	stopGrace = 10 * time.Second
	// startAttempts covers losing the race for a free port.
	startAttempts = 5
)

// Jars that QuorumPeerMain needs. zookeeper.jar's manifest Class-Path pulls
// in its own dependencies (jute, netty, slf4j-api, ...). The slf4j binding
// and log4j are optional: without them ZooKeeper runs but logs nothing
// ("SLF4J: Defaulting to no-operation (NOP) logger"), which makes a failed
// start impossible to diagnose.
var (
	zkJar       = "/usr/share/java/zookeeper.jar"
	loggingJars = []string{"/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}
)

// ErrNotInstalled is wrapped by errors about a missing java or ZooKeeper.
var ErrNotInstalled = errors.New("not installed")

// Config describes one standalone ZooKeeper server.
type Config struct {
	// Dir holds zoo.cfg, the data (version-2/) and the log. If empty a
	// temporary directory is created and removed by Stop.
	Dir string
	// Port is the client port; 0 picks a free one.
	Port int
	// TickTime is ZooKeeper's basic time unit; 0 means DefaultTickTime.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// the server grants; 0 keeps ZooKeeper's 2×TickTime and 20×TickTime.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// ExtraConfig lines ("key=value") are appended to zoo.cfg.
	ExtraConfig []string
	// ClassPath replaces the detected jars, for a ZooKeeper installed
	// elsewhere (e.g. /opt/zookeeper/lib/*).
	ClassPath []string
	// Logf, if set, receives lifecycle messages; it is only called from
	// within this package's methods, so testing.TB.Logf is safe.
	Logf func(format string, args ...any)
}

// Server is a running (or stopped) ZooKeeper process.
type Server struct {
	java    string
	cfg     Config
	dir     string
	ownsDir bool
	port    int

	procutil.Runner // Stop, Shutdown, Kill, Restart, Suspend, Resume ...
}

// LookPath returns the java binary and the class path for ZooKeeper.
func LookPath() (java string, classPath []string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", nil, fmt.Errorf("zkserver: java not found in PATH (apt-get install zookeeper brings it): %w", ErrNotInstalled)
	}
	if _, err := os.Stat(zkJar); err != nil {
		return "", nil, fmt.Errorf("zkserver: %s not found (apt-get install zookeeper): %w", zkJar, ErrNotInstalled)
	}
	classPath = []string{zkJar}
	for _, j := range loggingJars {
		if _, err := os.Stat(j); err == nil {
			classPath = append(classPath, j)
		}
	}
	return java, classPath, nil
}

// Start launches ZooKeeper and returns once it serves requests.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	java, cp, err := LookPath()
	if len(cfg.ClassPath) > 0 {
		cp = cfg.ClassPath
		if java, err = exec.LookPath("java"); err != nil {
			err = fmt.Errorf("zkserver: java not found in PATH: %w", ErrNotInstalled)
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.ClassPath = cp
	if cfg.TickTime == 0 {
		cfg.TickTime = DefaultTickTime
	}
	if cfg.TickTime < time.Millisecond {
		return nil, fmt.Errorf("zkserver: TickTime %v is below ZooKeeper's 1 ms resolution", cfg.TickTime)
	}
	s := &Server{java: java, cfg: cfg, dir: cfg.Dir}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "zkserver-")
		if err != nil {
			return nil, fmt.Errorf("zkserver: %w", err)
		}
		s.dir, s.ownsDir = d, true
	} else {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("zkserver: %w", err)
		}
		if s.dir, err = filepath.Abs(s.dir); err != nil {
			return nil, fmt.Errorf("zkserver: %w", err)
		}
	}

	s.Init(procutil.RunnerConfig{
		Name: "zkserver", Grace: stopGrace, Addr: s.Addr, Logf: s.logf,
		Launch: s.launch, BeforeRestart: func() error { return portFree(s.port) },
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
			// Probing is much cheaper than a JVM that starts only to fail.
			if lastErr = portFree(s.port); lastErr != nil {
				continue
			}
		}
		if err = s.writeConfig(); err != nil {
			break
		}
		lastErr = s.Launch(ctx)
		if lastErr == nil {
			s.logf("zkserver: started %s (pid %d, dir %s, tick %v, session timeouts %v..%v)",
				s.Addr(), s.Pid(), s.dir, cfg.TickTime, s.MinSessionTimeout(), s.MaxSessionTimeout())
			return s, nil
		}
		if !procutil.IsAddrInUse(lastErr) || ctx.Err() != nil {
			break
		}
		s.logf("zkserver: port %d taken, retrying", s.port)
	}
	if err == nil {
		err = lastErr
	}
	s.Abandon()
	return nil, fmt.Errorf("zkserver: start on port %d: %w", s.port, err)
}

// portFree reports whether the port can be bound now. Both Go and ZooKeeper
// set SO_REUSEADDR, so connections in TIME_WAIT do not count.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (s *Server) writeConfig() error {
	lines := []string{
		"tickTime=" + ms(s.cfg.TickTime),
		"dataDir=" + s.dir,
		"clientPort=" + strconv.Itoa(s.port),
		"clientPortAddress=127.0.0.1",
		// The admin server would bind 0.0.0.0:8080, which clashes between
		// parallel servers and leaves loopback.
		"admin.enableServer=false",
		// ruok, srvr, stat, mntr, ... (the default allows only srvr).
		"4lw.commands.whitelist=*",
		// Every test connects from 127.0.0.1; the default limit of 60
		// connections per address is easy to hit with parallel tests.
		"maxClientCnxns=0",
		// Page cache is enough to survive SIGKILL of the server, which is
		// the crash tests simulate; an fsync per write only slows them.
		"forceSync=no",
	}
	if s.cfg.MinSessionTimeout > 0 {
		lines = append(lines, "minSessionTimeout="+ms(s.cfg.MinSessionTimeout))
	}
	if s.cfg.MaxSessionTimeout > 0 {
		lines = append(lines, "maxSessionTimeout="+ms(s.cfg.MaxSessionTimeout))
	}
	lines = append(lines, s.cfg.ExtraConfig...)
	if err := os.WriteFile(s.cfgPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	// Our own log4j configuration: everything to stdout, which goes to the
	// log file, instead of Debian's /etc/zookeeper/conf that writes to
	// /var/log/zookeeper.
	const log4j = `log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
`
	return os.WriteFile(filepath.Join(s.dir, "log4j.properties"), []byte(log4j), 0o644)
}

func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

func (s *Server) args() []string {
	return []string{
		// A small heap and the C1 compiler only: several servers share a
		// small test machine and live for seconds.
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.log.dir=" + s.dir,
		"-Dlog4j.configuration=file:" + filepath.Join(s.dir, "log4j.properties"),
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", strings.Join(s.cfg.ClassPath, string(os.PathListSeparator)),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain",
		s.cfgPath(),
	}
}

// launch starts the server and waits until `ruok` answers `imok` and `srvr`
// reports a mode. ruok alone is not enough: it answers imok as soon as the
// port is open, while srvr still says "This ZooKeeper instance is not
// currently serving requests" for a few tens of milliseconds.
func (s *Server) launch(ctx context.Context) (*procutil.Proc, error) {
	addr := s.Addr()
	return procutil.StartReady(ctx, s.java, s.args(), s.dir, s.LogPath(), readyTimeout, 25*time.Millisecond,
		addr+" serving", func(ctx context.Context) error { return checkServing(ctx, addr) })
}

func checkServing(ctx context.Context, addr string) error {
	r, err := FourLetterWord(ctx, addr, "ruok")
	if err != nil {
		return err
	}
	if r != "imok" {
		return fmt.Errorf("ruok: %q", r)
	}
	r, err = FourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return err
	}
	if !strings.Contains(r, "Mode: ") {
		return fmt.Errorf("srvr: %q", strings.TrimSpace(r))
	}
	return nil
}

// FourLetterWord sends a four-letter command (ruok, srvr, stat, mntr, cons,
// dump, ...) to the server at addr and returns its whole answer.
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	// The server closes the connection after the answer.
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}

// Addr is "127.0.0.1:port", the connect string for one server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the client port.
func (s *Server) Port() int { return s.port }

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// TickTime is the configured tick.
func (s *Server) TickTime() time.Duration { return s.cfg.TickTime }

// MinSessionTimeout is the shortest session timeout the server grants.
func (s *Server) MinSessionTimeout() time.Duration {
	if s.cfg.MinSessionTimeout > 0 {
		return s.cfg.MinSessionTimeout
	}
	return 2 * s.cfg.TickTime
}

// MaxSessionTimeout is the longest session timeout the server grants.
func (s *Server) MaxSessionTimeout() time.Duration {
	if s.cfg.MaxSessionTimeout > 0 {
		return s.cfg.MaxSessionTimeout
	}
	return 20 * s.cfg.TickTime
}

// LogPath is the file receiving the server's output, across restarts.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "zookeeper.log") }

// LogTail returns the last n lines of the log, for failure messages.
func (s *Server) LogTail(n int) string { return procutil.LogTail(s.LogPath(), 0, n) }

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// EnsureInstalled installs Debian's zookeeper package (which brings a JRE)
// when ZooKeeper is missing, for demo programs on a fresh machine. It needs
// root or a password-less sudo.
func EnsureInstalled(ctx context.Context, logf func(format string, args ...any)) error {
	if _, _, err := LookPath(); err == nil {
		return nil
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := aptInstall(ctx, logf, "zookeeper"); err != nil {
		return err
	}
	_, _, err := LookPath()
	return err
}

func aptInstall(ctx context.Context, logf func(string, ...any), pkgs ...string) error {
	list := strings.Join(pkgs, " ")
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("zkserver: %s missing and apt-get not available; install it by hand: %w", list, ErrNotInstalled)
	}
	var prefix []string
	if os.Geteuid() != 0 {
		sudo, err := exec.LookPath("sudo")
		if err != nil {
			return fmt.Errorf("zkserver: %s missing; not root and no sudo, run: apt-get install -y %s: %w", list, list, ErrNotInstalled)
		}
		// -n: fail instead of hanging on a password prompt nobody sees.
		prefix = []string{sudo, "-n"}
	}
	run := func(args ...string) error {
		argv := append(append(append([]string{}, prefix...), apt), args...)
		logf("zkserver: running %s", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, logTailString(string(out), 20))
		}
		return nil
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	if err := run(install...); err != nil {
		// A fresh container usually has no package lists yet.
		if uerr := run("update"); uerr != nil {
			return fmt.Errorf("zkserver: %w", uerr)
		}
		if err := run(install...); err != nil {
			return fmt.Errorf("zkserver: %w", err)
		}
	}
	return nil
}

func logTailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
