package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// httpCeiling measures what wrk gets from a server that does nothing: an
// in-process net/http handler answering every PUT with 201 and a publish
// answer of the usual size, under the publish phase's wrk run. wrk, the
// server and (for the real servers) Redis share this machine's cores, so
// no server that does work can answer faster; the figure puts the
// rmqd/lmstfy ratios in proportion.
func httpCeiling(ctx context.Context, wrk, dir string, d time.Duration, size int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	answer := []byte(`{"job_id":"01M85HX9B17SNM6JMDW10WXY6R","msg":"published"}`)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(answer)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			progress("http: empty server: %v", err)
		}
	}()
	w, err := runWrk(ctx, wrk, dir, wrkPublishLua, "ceiling", size, d, "http://"+ln.Addr().String()+"/api/"+httpNS+"/ceiling?delay=0", []string{"X-Token: x"})
	if err != nil {
		return 0, err
	}
	return float64(w.requests-w.non2xx) / w.elapsed, nil
}
