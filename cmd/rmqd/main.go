// Command rmqd serves RMQ for Go over HTTP, wire-compatible with lmstfy:
// an API listener for publishing and consuming jobs, and an admin listener
// for tokens, rate limits, metrics and info. It keeps all its state in
// Redis, so any number of rmqd processes can run behind a load balancer.
//
//	rmqd --redis-url redis://127.0.0.1:6379/0 --listen 127.0.0.1:7777 --admin-listen 127.0.0.1:7778
//	rmqd --dev    # with a throwaway redis-server
//
// "rmqd --help" lists every flag and its environment variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/gc"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/logbuf"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// startTimeout bounds connecting to Redis at start-up.
const startTimeout = 30 * time.Second

// run is rmqd; it returns the exit status: 0 after a clean shutdown, 1 on
// an error, 2 for bad usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rmqd:", err)
		return 2
	}
	gc.Tune(getenv)
	// Nothing rmqd logs shows a password it was given (internal/redact/redact.go).
	stderr = redact.New(cfg.secrets()).Writer(stderr)
	log := newLogger(cfg, stderr)
	// The access log's lines are written out together (internal/logbuf/logbuf.go).
	accessOut := logbuf.New(stderr)
	defer accessOut.Close()
	access := newLogger(cfg, accessOut)
	// go-redis reports each failed dial itself; rmqd logs the failed
	// requests, so its messages are kept for debugging only.
	redis.SetLogger(redisLog{log})
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stopSignals()
	if err := serve(ctx, cfg, log, access, stdout); err != nil {
		log.Error("rmqd: stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// redisLog passes go-redis's own messages to slog at debug level.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// serve runs rmqd until ctx is done (SIGTERM), then shuts down in this
// order: long polls are ended, the listeners stop accepting and the
// requests in progress finish (up to --shutdown-timeout), then the RMQ
// clients and Redis connections close. Jobs handed out and not acked keep
// their lease in Redis and are redelivered when it runs out. With --dev it
// writes the addresses to use to stdout once it listens.
func serve(ctx context.Context, cfg config, log, access *slog.Logger, stdout io.Writer) error {
	if cfg.dev {
		url, stop, err := startDevRedis(ctx, log)
		if err != nil {
			return err
		}
		defer stop()
		cfg.redisURL, cfg.redisCluster = url, false
	}
	clients := map[string]redis.UniversalClient{}
	defer func() {
		for _, c := range clients {
			if c != nil { // a URL that did not parse left its entry nil
				_ = c.Close()
			}
		}
	}()
	roots, err := loadRoots(cfg.redisTLSCA)
	if err != nil {
		return err
	}
	if clients[names.DefaultPool], err = newRedis(cfg.redisURL, cfg.redisCluster, roots); err != nil {
		return err
	}
	for _, p := range cfg.pools.list {
		if clients[p.name], err = newRedis(p.url, cfg.redisCluster, roots); err != nil {
			return fmt.Errorf("pool %s: %w", p.name, err)
		}
	}

	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	svc, err := service.New(startCtx, service.Config{
		Prefix: cfg.prefix, CacheTTL: cfg.cacheTTL, MaxWait: cfg.maxWait,
		Accounts: cfg.accounts.m, AccessLog: cfg.accessLog, AccessLogger: access, Version: admin.ReadVersion(), Dashboard: cfg.dashboard,
		Pprof: cfg.pprof, AdminHosts: append(service.ListenHost(cfg.adminListen), cfg.adminHosts...),
		MaxAuthFailures: cfg.authFailures, TrustedProxies: cfg.trustedProxies, Secrets: cfg.secrets(),
		Forwards: cfg.forwards.List, Quotas: cfg.quotas,
	}, clients, log)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		defer cancel()
		if err := svc.Close(closeCtx); err != nil {
			log.Warn("rmqd: close", "err", err)
		}
	}()

	apiLn, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", cfg.adminListen)
	if err != nil {
		apiLn.Close()
		return err
	}
	servers := []*http.Server{
		newHTTPServer(api.Handler(svc), cfg.maxWait, log),
		newHTTPServer(admin.Handler(svc), cfg.maxWait, log),
	}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	for i, ln := range []net.Listener{svc.WrapListener("api", apiLn), svc.WrapListener("admin", adminLn)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := servers[i].Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	log.Info("rmqd: listening", "api", apiLn.Addr().String(), "admin", adminLn.Addr().String(),
		"pools", svc.PoolNames, "prefix", cfg.prefix)
	if cfg.dev {
		printDevBanner(stdout, apiLn.Addr(), adminLn.Addr(), cfg.redisURL, cfg.dashboard)
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("rmqd: shutting down")
	case serveErr = <-errc:
	}
	svc.BeginShutdown()
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(shutCtx); err != nil {
				log.Warn("rmqd: requests still running at the shutdown deadline", "err", err)
				_ = srv.Close()
			}
		}()
	}
	wg.Wait()
	log.Info("rmqd: stopped")
	return serveErr
}

// newHTTPServer has explicit timeouts: headers must come within 10 s and a
// body (a 64-job bulk publish) within 2 min; an answer may take as long as
// the longest long poll plus a margin; idle keep-alive connections close
// after 2 min.
func newHTTPServer(h http.Handler, maxWait time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      maxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
