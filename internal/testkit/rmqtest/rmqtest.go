// Package rmqtest is the test environment of everything built on package
// rmq: one test's Redis (the shared single node or the shared cluster, or
// one of the test's own), a key prefix, a captured library log, clients
// that close themselves, the Redis state of a topic, and a check that every
// script call keeps its keys in one cluster hash slot. It sits on top of
// internal/testkit/redistest.
//
// It imports package rmq (and producer, consumer), so a package's internal
// tests cannot use it when rmq imports that package (internal/engine,
// internal/scripts: their tests use redistest directly); external test
// packages can, rmq's own included (package rmq_test).
package rmqtest

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// WaitLong bounds a wait for something that must happen.
const WaitLong = redistest.WaitLong

// SyncBuffer is a bytes.Buffer safe for the library's goroutines to log to.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Backend is one kind of Redis a behaviour test runs against.
type Backend struct {
	Name    string
	Cluster bool
}

var (
	// SingleNode is the shared redis-server.
	SingleNode = Backend{Name: "single"}
	// Cluster is the shared 3-master/3-replica cluster.
	Cluster = Backend{Name: "cluster", Cluster: true}
	// Backends is the table a behaviour test runs over.
	Backends = []Backend{SingleNode, Cluster}
)

// Env is one test's view of Redis: a client on the shared (or a dedicated)
// server or cluster, a unique key prefix and a log buffer shown when the
// test fails. Every Redis client it makes checks that each script call
// names keys of one cluster hash slot (Scripts, verified when the test
// ends).
type Env struct {
	T       *testing.T
	Backend Backend
	Srv     *redisserver.Server  // single node; nil on a cluster
	Cl      *redisserver.Cluster // cluster; nil on a single node
	RDB     redis.UniversalClient
	Prefix  string
	Log     *SyncBuffer
	Logger  *slog.Logger
	Scripts *KeySlotCheck
}

// New is an Env on the shared redis-server.
func New(t *testing.T) *Env { return NewOn(t, redistest.Shared(t)) }

// NewFor is an Env on the shared server or the shared cluster.
func NewFor(t *testing.T, b Backend) *Env {
	t.Helper()
	if b.Cluster {
		return NewOnCluster(t, redistest.SharedCluster(t))
	}
	return New(t)
}

// NewOn is an Env on srv, the shared server or one of the test's own
// (redistest.Start) when the test disturbs it.
func NewOn(t *testing.T, srv *redisserver.Server) *Env {
	t.Helper()
	e := &Env{T: t, Backend: SingleNode, Srv: srv}
	e.init()
	return e
}

// NewOnCluster is an Env on cl, the shared cluster or one of the test's own
// (redistest.StartCluster) when the test disturbs it.
func NewOnCluster(t *testing.T, cl *redisserver.Cluster) *Env {
	t.Helper()
	e := &Env{T: t, Backend: Cluster, Cl: cl}
	e.init()
	return e
}

func (e *Env) init() {
	t := e.T
	t.Helper()
	e.Prefix = Prefix(t)
	e.Log = &SyncBuffer{}
	e.Logger = slog.New(slog.NewTextHandler(e.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.Scripts = NewKeySlotCheck(!e.Backend.Cluster)
	e.RDB = e.NewRedis()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("library log:\n%s", e.Log.String())
		}
	})
	t.Cleanup(func() { e.Scripts.Verify(t) })
}

// NewRedis returns another client on the Env's server or cluster (e.g. one
// to add hooks to), closed when the test ends; it checks the key slots of
// script calls too.
func (e *Env) NewRedis() redis.UniversalClient {
	var rdb redis.UniversalClient
	if e.Cl != nil {
		rdb = redistest.ClusterClient(e.T, e.Cl)
	} else {
		rdb = redistest.Client(e.T, e.Srv)
	}
	rdb.AddHook(redistest.Observer{Before: e.Scripts.Observe})
	return rdb
}

// Addrs lists the Env's Redis: the server's address, or every node of the
// cluster, comma-separated (for worker processes).
func (e *Env) Addrs() string {
	if e.Cl != nil {
		return strings.Join(e.Cl.Addrs(), ",")
	}
	return e.Srv.Addr()
}

// Client is an rmq.Client on the Env's prefix and log, closed when the test
// ends (before the Redis client is).
func (e *Env) Client(opts ...rmq.Option) *rmq.Client {
	e.T.Helper()
	return e.ClientOn(e.RDB, opts...)
}

// ClientOn is Client on another Redis client.
func (e *Env) ClientOn(rdb redis.UniversalClient, opts ...rmq.Option) *rmq.Client {
	e.T.Helper()
	c, err := rmq.New(rdb, append([]rmq.Option{rmq.WithPrefix(e.Prefix), rmq.WithLogger(e.Logger)}, opts...)...)
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.T.Errorf("close client: %v", err)
		}
	})
	return c
}

// Start starts c within 10 s. Its start context carries a pprof label of
// the Env, which the client's fetchers inherit: WaitFetchersAsleep finds
// them by it among the fetchers of tests running in parallel.
func (e *Env) Start(c *rmq.Client) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(pprof.WithLabels(context.Background(), e.labels()), 10*time.Second)
	defer cancel()
	require.NoError(e.T, c.Start(ctx))
}

func (e *Env) labels() pprof.LabelSet { return pprof.Labels(envLabel, e.Prefix) }

// envLabel names the pprof label of an Env's clients (its value is the
// Env's prefix).
const envLabel = "rmqtest"

// fetcherRun is the engine's fetcher loop, whose one select is where it
// sleeps.
const fetcherRun = "github.com/rmq-go/rmq/internal/engine/fetcher.(*Fetcher).Run"

// Labelled runs f on the calling goroutine with the Env's pprof label,
// which goroutines started in f inherit: run a long-polling Pull in it (go
// e.Labelled(...)) for WaitPullsWaiting to find it.
func (e *Env) Labelled(f func()) {
	pprof.Do(context.Background(), e.labels(), func(context.Context) { f() })
}

// pullRun is where a long-polling Pull sleeps (its one select).
const pullRun = "github.com/rmq-go/rmq/internal/pullwait.(*Call[...]).sleep"

// WaitPullsWaiting waits until n Pull calls made under Labelled are in
// their long-poll wait (parked in Pull's select, with no wake-up pending):
// what a send is then to wake.
func (e *Env) WaitPullsWaiting(n int) {
	e.T.Helper()
	redistest.WaitParked(e.T, pullRun, map[string]string{envLabel: e.Prefix}, n)
}

// WaitFetchersAsleep waits until the clients this Env started run n
// fetchers (one per registered topic that is not only pulled), every one
// parked in the select that ends its loop: the only place a fetcher
// sleeps, and it parks there only with no wake-up, release or timer
// pending. A message sent after it returns reaches them only through a
// wake-up (or their idle timer, a minute away): what a test of wake-ups
// needs, and what a sleep of a few hundred ms only made likely.
func (e *Env) WaitFetchersAsleep(n int) {
	e.T.Helper()
	redistest.WaitParked(e.T, fetcherRun, map[string]string{envLabel: e.Prefix}, n)
}

// Prefix is redistest.Prefix, checked to be a valid key prefix.
func Prefix(tb testing.TB) string {
	tb.Helper()
	p := redistest.Prefix(tb)
	require.NoError(tb, slots.ValidatePrefix(p))
	return p
}

// MustTopic is topic.New that fails the test.
func MustTopic(t *testing.T, name string, typ topic.Type, slotAmount int) topic.Topic {
	t.Helper()
	tp, err := topic.New(name, typ, slotAmount)
	require.NoError(t, err)
	return tp
}

// Ctx is a context of the test, bounded by a minute.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Producer returns a producer on rdb under prefix: the producer of a
// client that is never started, as a send-only program makes one.
func Producer(t testing.TB, rdb redis.UniversalClient, prefix string) *producer.Producer {
	t.Helper()
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	require.NoError(t, err)
	return c.Producer()
}
