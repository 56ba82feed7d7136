package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	pathpkg "path"
	"strings"
	"time"
)

// recorder wraps every answer: it carries the request's id and start, and
// remembers the status and size of the answer for the access log, the
// metrics and the throttle's give-back (statusOf).
type recorder struct {
	http.ResponseWriter
	id     string
	start  time.Time
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// statusOf is the status written so far through w (0: nothing yet).
func statusOf(w http.ResponseWriter) int {
	if r, ok := w.(*recorder); ok {
		return r.status
	}
	return 0
}

// requestID returns the id the middleware gave the request answered
// through w. It travels with the writer rather than in the request's
// context: a context value would cost every request a copy of the request.
func requestID(w http.ResponseWriter) string {
	if r, ok := w.(*recorder); ok {
		return r.id
	}
	return ""
}

// The canonical header names set on every answer, written into the header
// map directly (Header.Set canonicalizes its key on every call).
const (
	headerRequestID   = "X-Request-Id"
	headerContentType = "Content-Type"
)

// begin starts an answer: every answer carries a fresh X-Request-ID (a
// ULID, see newRequestID; an incoming one is ignored, as lmstfy does).
func begin(w http.ResponseWriter) *recorder {
	now := time.Now()
	rec := &recorder{ResponseWriter: w, id: newRequestID(now), start: now}
	w.Header()[headerRequestID] = []string{rec.id}
	return rec
}

// recoverPanic, deferred around a handler, turns its panic into a 500.
func (s *service) recoverPanic(rec *recorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	if rec.status == 0 {
		s.writeInternal(rec, r, fmt.Errorf("panic: %v", v))
	} else {
		s.log.ErrorContext(r.Context(), "rmqd: panic after the answer began", "request_id", rec.id, "panic", v)
	}
}

// finish counts the request and, when the access log is on, logs it in
// one line. The query string is never logged: it may hold a token.
func (s *service) finish(listener, pattern string, rec *recorder, r *http.Request) {
	if rec.status == 0 {
		rec.status = http.StatusOK // nothing written: net/http sends 200
	}
	elapsed := time.Since(rec.start)
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	s.metrics.observeRequest(listener, route, rec.status, elapsed)
	if s.accessLog.Load() {
		s.cfg.AccessLogger.LogAttrs(r.Context(), slog.LevelInfo, "access",
			slog.String("listener", listener),
			slog.String("request_id", rec.id),
			slog.String("method", r.Method),
			slog.String("path", logPath(r)),
			slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes),
			slog.Float64("ms", float64(elapsed.Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		)
	}
}

// logPath is r's path as log lines show it: a token in the path (the
// admin routes /token/{ns}/{token}…) is replaced by its fingerprint.
// The path is cleaned first, as the mux cleans it before routing (doubled
// slashes, "." and ".." segments, escaped dots), and "token" is matched in
// any case: a path that reaches the token routes only after a redirect,
// or does not reach them at all, still holds a token a client sent there.
// Every segment after the namespace is fingerprinted but the literal
// "limit" (a namespace with an escaped "/" shifts the token right). The
// query is never logged: it may hold a token too.
func logPath(r *http.Request) string {
	raw := r.URL.EscapedPath()
	dec := raw
	if u, err := url.PathUnescape(raw); err == nil {
		dec = u
	}
	clean := pathpkg.Clean("/" + dec)
	first, rest, _ := strings.Cut(clean[1:], "/")
	if !strings.EqualFold(first, "token") {
		return r.URL.Path
	}
	segs := strings.Split(rest, "/")
	for i := 1; i < len(segs); i++ {
		if segs[i] == "limit" && i == len(segs)-1 {
			continue
		}
		pool, bare := splitToken(segs[i])
		fp := fingerprint(bare)
		if strings.Contains(segs[i], ":") {
			fp = pool + ":" + fp
		}
		segs[i] = fp
	}
	return "/" + first + "/" + strings.Join(segs, "/")
}

// serve wraps the admin listener's mux: a request the admin gate refuses
// (a foreign Host, a cross-site action) goes no further; unmatched routes
// and methods get the listener's 404 instead of the mux's 405 or
// redirect, a panic becomes a 500, and each request carries an id, is
// counted and may be logged.
func (s *service) serve(listener string, mux *http.ServeMux, notFound http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := begin(w)
		// Handler only finds the pattern; ServeHTTP matches again and sets
		// the path values, which Handler leaves out.
		var h http.Handler = mux
		_, pattern := mux.Handler(r)
		if pattern == "" {
			h = notFound
		}
		if s.adminGate(rec, r) {
			s.runHandler(h, rec, r)
		}
		s.finish(listener, pattern, rec, r)
	})
}

func (s *service) runHandler(h http.Handler, rec *recorder, r *http.Request) {
	defer s.recoverPanic(rec, r)
	h.ServeHTTP(rec, r)
}

// serveAPI is serve for the API listener, over its router (router.go).
func (s *service) serveAPI(rt *apiRouter, notFound http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := begin(w)
		route, ns, q, id := rt.match(r)
		pattern := ""
		if route == nil {
			s.runHandler(notFound, rec, r)
		} else {
			pattern = route.pattern
			s.runRoute(route, rec, r, ns, q, id)
		}
		s.finish("api", pattern, rec, r)
	})
}

func (s *service) runRoute(route *apiRoute, rec *recorder, r *http.Request, ns, q, id string) {
	defer s.recoverPanic(rec, r)
	route.h(rec, r, ns, q, id)
}

// isTooLarge reports whether err comes from an http.MaxBytesReader.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// readBody reads a request body of at most limit bytes; a longer one is an
// *http.MaxBytesError (see isTooLarge). A body of known length is read
// into a buffer of its size.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= limit {
		// The body reader stops at the declared length.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}
