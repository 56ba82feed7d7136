package redistest

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// The examples' server is apart from the shared one: an Example gets a Redis
// as empty as a new user's, and emptying it cannot touch the keys of tests.
var (
	exMu  sync.Mutex
	exSrv *redisserver.Server
	exErr error
)

// ExampleAddr returns the address of a redis-server for the package's
// Example functions, emptied (FLUSHALL) before it returns, so that every
// Example starts from no keys and may use the default key prefix. The
// server is started on first use and stopped by Main (StopShared). Examples
// run one at a time, after the tests; an Example has no testing.TB, so a
// server that cannot start panics (the Example fails with the reason).
func ExampleAddr() string {
	exMu.Lock()
	defer exMu.Unlock()
	if exSrv == nil && exErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		exSrv, exErr = redisserver.Start(ctx, redisserver.Config{})
		cancel()
	}
	if exErr != nil {
		panic(fmt.Sprintf("redistest: the examples' redis-server: %v", exErr))
	}
	rdb := redis.NewClient(&redis.Options{Addr: exSrv.Addr(), DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		panic(fmt.Sprintf("redistest: emptying the examples' redis-server: %v", err))
	}
	return exSrv.Addr()
}

// stopExamples stops the examples' server if it was started; ExampleAddr
// panics after it.
func stopExamples() error {
	exMu.Lock()
	defer exMu.Unlock()
	srv := exSrv
	exSrv, exErr = nil, fmt.Errorf("redistest: shared servers already stopped")
	if srv == nil {
		return nil
	}
	return srv.Stop()
}
