// Package brokerserver runs real message brokers on loopback ports for the
// forwarders' tests and demo programs: nats-server with JetStream and a
// throwaway RabbitMQ node (Debian's nats-server and rabbitmq-server
// packages). Each server keeps its data in a directory of its own, so
// Shutdown (or Kill) and Restart bring back what was stored, as a broker
// restart does in production.
//
// It speaks just enough of each protocol to know when a server serves
// (NATS: the JetStream API answers; RabbitMQ: the AMQP handshake starts), so
// the core module does not depend on any broker client. Kafka has no server
// here: its tests run franz-go's in-process kfake. See package brokertest
// for the test helpers.
package brokerserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	// natsReadyTimeout bounds the wait for JetStream; it answers about 30 ms
	// after the exec on this machine, longer when it recovers big streams.
	natsReadyTimeout = 30 * time.Second
	// natsStopGrace: SIGTERM stops nats-server at once.
	natsStopGrace = 10 * time.Second
	startAttempts = 5
)

// ErrNotInstalled is wrapped by the errors about a missing broker binary.
var ErrNotInstalled = errors.New("not installed")

// NATSConfig describes one nats-server with JetStream.
type NATSConfig struct {
	// Dir holds the JetStream store and the log. If empty a temporary
	// directory is created and removed by Stop.
	Dir string
	// Port is the client port; 0 picks a free one.
	Port int
	// Logf, if set, receives lifecycle messages; it is only called from
	// this package's methods, so testing.TB.Logf is safe.
	Logf func(format string, args ...any)
}

// NATS is a running (or stopped) nats-server.
type NATS struct {
	bin     string
	cfg     NATSConfig
	dir     string
	ownsDir bool
	port    int

	procutil.Runner // Stop, Shutdown, Kill, Restart, Suspend, Resume ...
}

// LookNATS returns the path of nats-server.
func LookNATS() (string, error) {
	p, err := exec.LookPath("nats-server")
	if err != nil {
		return "", fmt.Errorf("brokerserver: nats-server not found in PATH (apt-get install nats-server): %w", ErrNotInstalled)
	}
	return p, nil
}

// StartNATS launches nats-server with JetStream and returns once the
// JetStream API answers.
func StartNATS(ctx context.Context, cfg NATSConfig) (*NATS, error) {
	bin, err := LookNATS()
	if err != nil {
		return nil, err
	}
	s := &NATS{bin: bin, cfg: cfg}
	if s.dir, s.ownsDir, err = serverDir(cfg.Dir, "natsserver-"); err != nil {
		return nil, err
	}
	s.Init(procutil.RunnerConfig{
		Name: "natsserver", Grace: natsStopGrace, Addr: s.Addr, Logf: s.logf,
		Launch: s.launch, BeforeRestart: func() error { return portFree(s.port) },
	}, s.dir, s.ownsDir)

	var lastErr error
	for attempt := range startAttempts {
		if s.port, err = pickPort(cfg.Port, attempt); err != nil {
			break
		}
		if lastErr = s.Launch(ctx); lastErr == nil {
			s.logf("natsserver: started %s (pid %d, dir %s)", s.Addr(), s.Pid(), s.dir)
			return s, nil
		}
		if !addrInUse(lastErr) || ctx.Err() != nil || cfg.Port != 0 {
			break
		}
		s.logf("natsserver: port %d taken, retrying", s.port)
	}
	if err == nil {
		err = lastErr
	}
	s.Abandon()
	return nil, fmt.Errorf("natsserver: start on port %d: %w", s.port, err)
}

func (s *NATS) args() []string {
	return []string{
		"-js", "-sd", filepath.Join(s.dir, "store"),
		"-a", "127.0.0.1", "-p", strconv.Itoa(s.port),
		// A fixed name: JetStream keys its store by server name, and a
		// random one per start would hide the streams of the last run.
		"-n", "natsserver-" + strconv.Itoa(s.port),
	}
}

func (s *NATS) launch(ctx context.Context) (*procutil.Proc, error) {
	addr := s.Addr()
	return procutil.StartReady(ctx, s.bin, s.args(), s.dir, s.LogPath(), natsReadyTimeout, 10*time.Millisecond,
		"JetStream on "+addr, func(ctx context.Context) error {
			reply, err := JSRequest(ctx, addr, "$JS.API.INFO", nil)
			if err != nil {
				return err
			}
			return jsError(reply)
		})
}

// jsError returns the error a JetStream API reply carries, if any.
func jsError(reply []byte) error {
	var r struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return fmt.Errorf("JetStream reply %q: %w", reply, err)
	}
	if r.Error != nil {
		return fmt.Errorf("JetStream: %d %s", r.Error.Code, r.Error.Description)
	}
	return nil
}

// JSRequest sends one request to the NATS server at addr on a connection of
// its own and returns the reply's payload: enough of the protocol to call
// the JetStream API ($JS.API.INFO, $JS.API.STREAM.CREATE.<name>, ...)
// without a client library. A request nobody answers fails when ctx ends
// or after two seconds.
func JSRequest(ctx context.Context, addr, subject string, payload []byte) ([]byte, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()

	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "INFO ") {
		return nil, fmt.Errorf("nats greeting %q", strings.TrimSpace(line))
	}
	const inbox = "_INBOX.brokerserver"
	req := fmt.Sprintf("CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB %s 1\r\nPUB %s %s %d\r\n%s\r\n",
		inbox, subject, inbox, len(payload), payload)
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "PING":
			if _, err := c.Write([]byte("PONG\r\n")); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "-ERR"):
			return nil, fmt.Errorf("nats: %s", line)
		case strings.HasPrefix(line, "MSG "):
			f := strings.Fields(line)
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return nil, fmt.Errorf("nats: %q: %w", line, err)
			}
			body := make([]byte, n+2) // payload and its CRLF
			if _, err := io.ReadFull(r, body); err != nil {
				return nil, err
			}
			return body[:n], nil
		}
	}
}

// Addr is "127.0.0.1:port".
func (s *NATS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the client URL, nats://127.0.0.1:port.
func (s *NATS) URL() string { return "nats://" + s.Addr() }

// Port is the client port.
func (s *NATS) Port() int { return s.port }

// Dir is the server's directory (JetStream store under store/).
func (s *NATS) Dir() string { return s.dir }

// LogPath is the file receiving the server's output, across restarts.
func (s *NATS) LogPath() string { return filepath.Join(s.dir, "nats.log") }

// LogTail returns the last n lines of the log, for failure messages.
func (s *NATS) LogTail(n int) string { return procutil.LogTail(s.LogPath(), 0, n) }

func (s *NATS) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// serverDir returns dir made absolute and created, or a new temporary
// directory that the server owns (removes on Stop).
func serverDir(dir, pattern string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", pattern)
		if err != nil {
			return "", false, fmt.Errorf("brokerserver: %w", err)
		}
		return d, true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("brokerserver: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("brokerserver: %w", err)
	}
	return abs, false, nil
}

// pickPort returns the configured port, or a fresh free one.
func pickPort(port, attempt int) (int, error) {
	if port != 0 {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		return port, nil
	}
	return procutil.FreePort()
}

// portFree reports whether the port can be bound now.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// addrInUse reports a start that failed because its port was taken. The
// brokers word it "address already in use" (the Go and Erlang runtimes'
// text, lower case) or "eaddrinuse".
func addrInUse(err error) bool {
	var ex *procutil.ExitedError
	if !errors.As(err, &ex) {
		return false
	}
	t := strings.ToLower(ex.Tail)
	return strings.Contains(t, "address already in use") || strings.Contains(t, "eaddrinuse")
}
