package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rmq-go/rmq/internal/zkserver"
)

// openZooKeeper returns the ZooKeeper address to use and a cleanup func:
// ZK_ADDR when set, else a throwaway standalone server on a free loopback
// port (Debian's zookeeper package, installed with apt-get if missing).
func openZooKeeper(ctx context.Context, logf func(string, ...any)) (string, func(), error) {
	if addr := os.Getenv("ZK_ADDR"); addr != "" {
		logf("using ZooKeeper at %s (ZK_ADDR)", addr)
		return addr, func() {}, nil
	}
	if err := zkserver.EnsureInstalled(ctx, logf); err != nil {
		return "", nil, fmt.Errorf("no ZK_ADDR and cannot run a local ZooKeeper: %w", err)
	}
	// Tick 200 ms: the server grants session timeouts of 0.4..4 s, so a
	// departed worker's slots move within seconds.
	srv, err := zkserver.Start(ctx, zkserver.Config{TickTime: 200 * time.Millisecond})
	if err != nil {
		return "", nil, err
	}
	logf("started a throwaway ZooKeeper on %s (set ZK_ADDR to use your own)", srv.Addr())
	return srv.Addr(), func() {
		if err := srv.Stop(); err != nil {
			logf("stopping ZooKeeper: %v", err)
		} else {
			logf("stopped the throwaway ZooKeeper")
		}
	}, nil
}
