package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// redisServer is the throwaway redis-server the benchmark runs against: a
// free loopback port, no persistence, its own temporary directory.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
	dir  string
	done chan struct{}
}

func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found (apt-get install redis-server): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "rmq-bench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, done: make(chan struct{})}
		s.cmd = exec.Command(path,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis.log"))
		setPdeathsig(s.cmd)
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		if lastErr = s.waitReady(ctx); lastErr == nil {
			return s, nil
		}
		s.kill()
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w\n%s", lastErr, log)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the server answers PING.
func (s *redisServer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("no PONG within 10s")
}

func (s *redisServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// stop ends the server (SIGTERM, SIGKILL after 10 s) and removes its directory.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	os.RemoveAll(s.dir)
}
