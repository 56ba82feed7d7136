// Package exampleredis gives the example programs a Redis to talk to: the
// server at REDIS_ADDR when that is set, else a throwaway redis-server on a
// free loopback port (installed with apt-get first if it is missing).
package exampleredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/redisserver"
)

// Open returns a client and a cleanup func that closes it and stops the
// throwaway server, if one was started. logf receives progress lines
// ("starting redis-server ..."); nil discards them.
func Open(ctx context.Context, logf func(format string, args ...any)) (*redis.Client, func(), error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, nil, fmt.Errorf("REDIS_ADDR=%s: %w", addr, err)
		}
		logf("using Redis at %s (REDIS_ADDR)", addr)
		return rdb, func() { rdb.Close() }, nil
	}
	if err := redisserver.EnsureInstalled(ctx, logf); err != nil {
		return nil, nil, fmt.Errorf("no REDIS_ADDR and cannot run a local redis-server: %w", err)
	}
	srv, err := redisserver.Start(ctx, redisserver.Config{})
	if err != nil {
		return nil, nil, err
	}
	logf("started a throwaway redis-server on %s (set REDIS_ADDR to use your own)", srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	cleanup := func() {
		rdb.Close()
		if err := srv.Stop(); err != nil {
			logf("stopping redis-server: %v", err)
		} else {
			logf("stopped the throwaway redis-server")
		}
	}
	return rdb, cleanup, nil
}

// KeyPrefix returns a key prefix that no earlier run used, so a run against
// a shared REDIS_ADDR starts from empty queues: "rmq-example-<name>-<time>".
func KeyPrefix(name string) string {
	return "rmq-example-" + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// DeleteKeys removes every key under prefix (prefix + ":*").
func DeleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var errs []error
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			errs = append(errs, rdb.Unlink(ctx, batch...).Err())
			batch = batch[:0]
		}
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			flush()
		}
	}
	flush()
	errs = append(errs, iter.Err())
	return errors.Join(errs...)
}
