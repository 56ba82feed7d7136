package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"
)

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the id the middleware gave this request.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// recorder remembers the status and size of an answer for the access log,
// the metrics and the throttle's give-back (statusOf).
type recorder struct {
	http.ResponseWriter
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

// serve wraps a listener's mux: every answer carries a fresh X-Request-ID
// (a ULID; an incoming one is ignored, as lmstfy does), unmatched routes and
// methods get the listener's 404 instead of the mux's 405 or redirect, a
// panic becomes a 500, and each request is counted and, when the access log
// is on, logged in one line. The query string is never logged: it may hold
// a token.
func (s *service) serve(listener string, mux *http.ServeMux, notFound http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := ulid.Make().String()
		w.Header().Set("X-Request-ID", id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		rec := &recorder{ResponseWriter: w}

		// Handler only finds the pattern; ServeHTTP matches again and sets
		// the path values, which Handler leaves out.
		var h http.Handler = mux
		_, pattern := mux.Handler(r)
		if pattern == "" {
			h = notFound
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					if rec.status == 0 {
						s.writeInternal(rec, r, fmt.Errorf("panic: %v", v))
					} else {
						s.log.ErrorContext(r.Context(), "rmqd: panic after the answer began", "request_id", id, "panic", v)
					}
				}
			}()
			h.ServeHTTP(rec, r)
		}()
		if rec.status == 0 {
			rec.status = http.StatusOK // nothing written: net/http sends 200
		}
		elapsed := time.Since(start)
		route := pattern
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observeRequest(listener, route, rec.status, elapsed)
		if s.accessLog.Load() {
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "access",
				slog.String("listener", listener),
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", rec.status),
				slog.Int64("bytes", rec.bytes),
				slog.Float64("ms", float64(elapsed.Microseconds())/1000),
				slog.String("remote", r.RemoteAddr),
			)
		}
	})
}

// isTooLarge reports whether err comes from an http.MaxBytesReader.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}
