package service

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// recoverPanic, deferred around a handler, turns its panic into a 500.
func (s *Service) recoverPanic(rec *respond.Recorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	if rec.Status == 0 {
		s.WriteInternal(rec, r, fmt.Errorf("panic: %v", v))
	} else {
		s.Log.ErrorContext(r.Context(), "rmqd: panic after the answer began", "request_id", rec.ID, "panic", v)
	}
}

// finish counts the request and, when the access log is on, logs it in
// one line. The query string is never logged: it may hold a token.
func (s *Service) finish(listener, pattern string, rec *respond.Recorder, r *http.Request) {
	if rec.Status == 0 {
		rec.Status = http.StatusOK // nothing written: net/http sends 200
	}
	elapsed := time.Since(rec.Start)
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	s.Metrics.ObserveRequest(listener, route, rec.Status, elapsed)
	if s.AccessLog.Load() {
		s.Cfg.AccessLogger.LogAttrs(r.Context(), slog.LevelInfo, "access",
			slog.String("listener", listener),
			slog.String("request_id", rec.ID),
			slog.String("method", r.Method),
			slog.String("path", respond.LogPath(r)),
			slog.Int("status", rec.Status),
			slog.Int64("bytes", rec.Bytes),
			slog.Float64("ms", float64(elapsed.Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		)
	}
}

// Serve wraps the admin listener's mux: a request the admin gate refuses
// (a foreign Host, a cross-site action) goes no further; unmatched routes
// and methods get the listener's 404 instead of the mux's 405 or
// redirect, a panic becomes a 500, and each request carries an id, is
// counted and may be logged.
func (s *Service) Serve(listener string, mux *http.ServeMux, notFound http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := respond.Begin(w)
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

func (s *Service) runHandler(h http.Handler, rec *respond.Recorder, r *http.Request) {
	defer s.recoverPanic(rec, r)
	h.ServeHTTP(rec, r)
}

// ServeAPI is serve for the API listener, over its router (router.go).
func (s *Service) ServeAPI(rt *APIRouter, notFound http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := respond.Begin(w)
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

func (s *Service) runRoute(route *apiRoute, rec *respond.Recorder, r *http.Request, ns, q, id string) {
	defer s.recoverPanic(rec, r)
	route.h(rec, r, ns, q, id)
}

// WriteInternal answers 500 {"error":"internal error","request_id":...}
// and logs the cause with the same request id, so an operator can find
// the one from the other. lmstfy's body has no request_id; the extra field
// is harmless to its clients.
func (s *Service) WriteInternal(w http.ResponseWriter, r *http.Request, err error) {
	id := respond.RequestID(w)
	s.Log.ErrorContext(r.Context(), "rmqd: request failed", "request_id", id, "method", r.Method, "path", respond.LogPath(r), "err", err)
	respond.WriteJSON(w, http.StatusInternalServerError, struct {
		Error     string `json:"error"`
		RequestID string `json:"request_id"`
	}{"internal error", id})
}
