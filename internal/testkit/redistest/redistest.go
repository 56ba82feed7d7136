// Package redistest gives tests real Redis servers: one shared server and one
// shared cluster per test binary (started on first use), dedicated servers
// for tests that kill or reconfigure them, clients that close themselves, and
// per-test key prefixes so parallel tests can share a server.
//
// Use it with a TestMain so the shared servers are stopped at the end and,
// once they are, goleak finds no goroutine the tests left running:
//
//	func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
//
// Without it the servers die with the test binary (they are started with a
// parent death signal on Linux) but their temporary directories are left
// behind.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// startTimeout bounds how long a test waits for a server or cluster.
const startTimeout = 60 * time.Second

// Separate locks so a test waiting for the cluster to form does not hold up
// tests that only want the single server.
var (
	srvMu     sync.Mutex
	sharedSrv *redisserver.Server
	sharedErr error
	srvDone   bool

	clMu     sync.Mutex
	sharedCl *redisserver.Cluster
	clErr    error
	clDone   bool
)

// Main runs the tests and then stops the shared server and cluster (and the
// examples' server, ExampleAddr) if any test started them. It returns the
// exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Println("redistest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// VerifyTestMain runs the tests, stops the shared server and cluster, and
// then fails the test binary if a goroutine is left that is not in
// LeakOptions(more...); it exits the process. It is goleak.VerifyTestMain
// with the servers stopped first, so the check sees only what the tests
// left running.
func VerifyTestMain(m *testing.M, more ...goleak.Option) {
	goleak.VerifyTestMain(stopAfter{m}, LeakOptions(more...)...)
}

// stopAfter is a goleak.TestingM whose Run also stops the shared servers.
type stopAfter struct{ m *testing.M }

func (s stopAfter) Run() int { return Main(s.m) }

// LeakOptions are the goleak options of a test binary that starts servers,
// followed by more. procutil forks every server from one OS thread that
// lives as long as the binary (Linux sends the parent-death signal when the
// forking thread exits, so that thread must never end): its goroutine is
// by design, not a leak.
func LeakOptions(more ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{goleak.IgnoreTopFunction("github.com/rmq-go/rmq/internal/testkit/procutil.spawn.func1.1")}, more...)
}

// StopShared stops the shared server and cluster, and the examples' server.
// It is for a TestMain that cannot use Main, e.g. because it also stops
// other shared fixtures.
func StopShared() error {
	srvMu.Lock()
	defer srvMu.Unlock()
	clMu.Lock()
	defer clMu.Unlock()
	var errs []error
	if sharedSrv != nil {
		errs = append(errs, sharedSrv.Stop())
		sharedSrv = nil
	}
	if sharedCl != nil {
		errs = append(errs, sharedCl.Stop())
		sharedCl = nil
	}
	errs = append(errs, stopExamples())
	sharedErr = errors.New("redistest: shared servers already stopped")
	clErr = sharedErr
	srvDone, clDone = true, true
	return errors.Join(errs...)
}

// Shared returns the redis-server shared by all tests of this binary,
// starting it on first use. Tests must confine themselves to keys under
// their Prefix and must not kill, suspend or reconfigure it; use Start for
// that. FLUSHALL is off limits too.
func Shared(tb testing.TB) *redisserver.Server {
	tb.Helper()
	srvMu.Lock()
	defer srvMu.Unlock()
	if !srvDone {
		srvDone = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		sharedSrv, sharedErr = redisserver.Start(ctx, redisserver.Config{})
		cancel()
	}
	if sharedErr != nil {
		tb.Fatalf("redistest: shared redis-server: %v", sharedErr)
	}
	return sharedSrv
}

// SharedCluster returns the Redis cluster shared by all tests of this
// binary, starting it on first use (about 4 s). The same rules as for Shared
// apply; a test that fails over or moves slots should start its own cluster
// with StartCluster.
func SharedCluster(tb testing.TB) *redisserver.Cluster {
	tb.Helper()
	clMu.Lock()
	defer clMu.Unlock()
	if !clDone {
		clDone = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		sharedCl, clErr = redisserver.StartCluster(ctx, redisserver.ClusterConfig{})
		cancel()
	}
	if clErr != nil {
		tb.Fatalf("redistest: shared redis cluster: %v", clErr)
	}
	return sharedCl
}

// Start starts a dedicated redis-server that is stopped when the test ends.
// Lifecycle messages go to tb.Logf unless cfg.Logf is set, and the server's
// log tail is printed if the test failed.
func Start(tb testing.TB, cfg redisserver.Config) *redisserver.Server {
	tb.Helper()
	if cfg.Logf == nil {
		cfg.Logf = tb.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := redisserver.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("redistest: log tail of %s:\n%s", srv.Addr(), srv.LogTail(30))
		}
		if err := srv.Stop(); err != nil {
			tb.Errorf("redistest: stop %s: %v", srv.Addr(), err)
		}
	})
	return srv
}

// StartCluster starts a dedicated cluster that is stopped when the test ends.
func StartCluster(tb testing.TB, cfg redisserver.ClusterConfig) *redisserver.Cluster {
	tb.Helper()
	if cfg.Logf == nil {
		cfg.Logf = tb.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := redisserver.StartCluster(ctx, cfg)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, n := range c.Nodes() {
				tb.Logf("redistest: log tail of %s:\n%s", n.Addr(), n.LogTail(15))
			}
		}
		if err := c.Stop(); err != nil {
			tb.Errorf("redistest: stop cluster: %v", err)
		}
	})
	return c
}

// Client returns a client for srv that is closed when the test ends. opts
// may adjust the options (timeouts, MaxRetries, protocol) before it is made.
func Client(tb testing.TB, srv *redisserver.Server, opts ...func(*redis.Options)) *redis.Client {
	tb.Helper()
	o := &redis.Options{
		Addr: srv.Addr(),
		// Redis 7.0 does not know CLIENT SETINFO; skipping it keeps the
		// first command of every connection out of the server's error stats.
		DisableIdentity: true,
	}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { c.Close() })
	return c
}

// ClusterClient returns a cluster client seeded with every node of c, closed
// when the test ends.
func ClusterClient(tb testing.TB, c *redisserver.Cluster, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	tb.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true}
	for _, f := range opts {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// Prefix returns a key prefix unique to this test run: "t", eight random
// characters, "-" and the end of the test name reduced to [A-Za-z0-9._-],
// at most the 64 characters a key prefix may have. It has no hash tag, so
// keys built on it spread over a cluster.
func Prefix(tb testing.TB) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	b.WriteByte('t')
	for range 8 {
		b.WriteByte(alphabet[rand.IntN(len(alphabet))])
	}
	b.WriteByte('-')
	name := tb.Name()
	// The random part keeps it unique; the name is for humans.
	if room := 64 - b.Len(); len(name) > room {
		name = name[len(name)-room:]
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// KeysWithPrefix returns, sorted, the keys that start with prefix, scanning
// every master of a cluster client (or every shard of a ring).
func KeysWithPrefix(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pattern := globEscape(prefix) + "*"
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var found []string
		for it.Next(ctx) {
			found = append(found, it.Val())
		}
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		err = it.Err()
	}
	if err != nil {
		tb.Fatalf("redistest: scan for %q: %v", pattern, err)
	}
	slices.Sort(keys)
	// A key may be seen twice while a slot migrates between masters.
	return slices.Compact(keys)
}

// CheckNoLeftoverKeys reports a test error if any key with prefix remains,
// e.g. a queue that should have cleaned up after itself.
func CheckNoLeftoverKeys(tb testing.TB, rdb redis.UniversalClient, prefix string) {
	tb.Helper()
	keys := KeysWithPrefix(tb, rdb, prefix)
	if len(keys) == 0 {
		return
	}
	shown := keys
	if len(shown) > 20 {
		shown = shown[:20]
	}
	tb.Errorf("redistest: %d leftover keys with prefix %q: %s", len(keys), prefix, strings.Join(shown, ", "))
}

// globEscape quotes the characters SCAN MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
