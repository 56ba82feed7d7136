package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rmq-go/rmq/internal/redisserver"
)

// startDevRedis starts a throwaway redis-server for --dev: a loopback port,
// a temporary directory, no persistence; it installs Debian's package first
// when redis-server is missing (as scripts/demo.sh does). The stop function
// kills it and removes its directory.
//
// It is a flag and not a script so that one command works from any
// directory with Go alone (go run ./cmd/rmqd --dev), and the server's life
// is tied to rmqd's: it goes when rmqd goes, even after a crash (it is
// started with a parent-death signal on Linux).
func startDevRedis(ctx context.Context, log *slog.Logger) (url string, stop func(), err error) {
	logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	if err := redisserver.EnsureInstalled(ctx, logf); err != nil {
		return "", nil, err
	}
	srv, err := redisserver.Start(ctx, redisserver.Config{Logf: logf})
	if err != nil {
		return "", nil, err
	}
	log.Warn("rmqd: --dev: using a throwaway redis-server; everything is lost when rmqd stops", "redis", srv.Addr())
	return "redis://" + srv.Addr() + "/0", func() {
		if err := srv.Stop(); err != nil {
			log.Warn("rmqd: stop the --dev redis-server", "err", err)
		}
	}, nil
}
