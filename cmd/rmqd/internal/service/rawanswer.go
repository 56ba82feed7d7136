package service

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/ids"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// Some answers are written by net/http itself, on the connection, without
// any handler running: a request it could not parse (400: a bad URL
// escape such as "PUT /api/ns/%", a negative or doubled Content-Length, a
// malformed Host), headers too large (431), an unknown Transfer-Encoding
// (501), an Expect it does not support (417). Those answers would carry no
// X-Request-Id, and no handler-level hook sees them (the server's ErrorLog
// is not told either). So each listener's connections are wrapped: a
// response head of status 4xx or 5xx, complete in one Write, that has no
// X-Request-Id gets one after its status line, and is counted and
// access-logged like any other answer. Every answer rmqd's handlers write
// carries the header already, so only net/http's own are changed.
//
// Only the first Write after the connection read something is looked at:
// net/http writes its own answer, in one Write, right after reading the
// request it refuses, and a handler's answer starts with the first Write
// after its request was read; later Writes of an answer (a large body)
// are passed on untouched, whatever they hold. A 1xx/2xx/3xx head is
// passed on after looking at 10 bytes.

// idListener wraps the connections of a listener named name.
type idListener struct {
	net.Listener
	s    *Service
	name string
}

func (s *Service) WrapListener(name string, ln net.Listener) net.Listener {
	return &idListener{Listener: ln, s: s, name: name}
}

func (l *idListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &idConn{Conn: c, l: l}, nil
}

type idConn struct {
	net.Conn
	l *idListener
	// read is set when the connection read bytes since its last Write
	// (Reads and Writes may run on different goroutines).
	read atomic.Bool
}

func (c *idConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.Store(true)
	}
	return n, err
}

var (
	headEnd      = []byte("\r\n\r\n")
	lineEnd      = []byte("\r\n")
	requestIDHdr = []byte("\r\n" + respond.HeaderRequestID + ": ")
)

func (c *idConn) Write(p []byte) (int, error) {
	if !c.read.Swap(false) || len(p) < 12 || p[9] < '4' || p[9] > '5' || !bytes.HasPrefix(p, []byte("HTTP/1.")) {
		return c.Conn.Write(p)
	}
	end := bytes.Index(p, headEnd)
	if end < 0 || bytes.Contains(p[:end+2], requestIDHdr) {
		return c.Conn.Write(p)
	}
	eol := bytes.Index(p, lineEnd)
	id := ids.NewRequestID(time.Now())
	out := make([]byte, 0, len(p)+len(requestIDHdr)+len(id))
	out = append(out, p[:eol]...)
	out = append(out, requestIDHdr...)
	out = append(out, id...)
	out = append(out, p[eol:]...)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	status, _ := strconv.Atoi(string(p[9:12]))
	c.l.s.rawAnswer(c.l.name, id, status, c.RemoteAddr().String())
	return len(p), nil
}

// CloseWrite passes on to the TCP connection: net/http half-closes a
// connection after an error answer so that the client reads it before the
// close (it skips that for a connection without the method).
func (c *idConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// rawAnswer counts and logs an answer net/http wrote itself.
func (s *Service) rawAnswer(listener, id string, status int, remote string) {
	s.Metrics.ObserveRequest(listener, "malformed", status, 0)
	if s.AccessLog.Load() {
		s.Cfg.AccessLogger.LogAttrs(context.Background(), slog.LevelInfo, "access",
			slog.String("listener", listener),
			slog.String("request_id", id),
			slog.String("method", ""),
			slog.String("path", "(malformed request)"),
			slog.Int("status", status),
			slog.String("remote", remote),
		)
	}
}
