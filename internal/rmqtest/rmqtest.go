// Package rmqtest is the test environment of the optional integration
// modules (x/prometheus, x/otel): one test's Redis client, key prefix and
// captured library log, on top of internal/redistest. It imports package
// rmq, so rmq's and consumer's own tests cannot use it (they keep theirs).
package rmqtest

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/redisserver"
	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// WaitLong bounds a wait for something that must happen.
const WaitLong = 15 * time.Second

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

// Env is one test's Redis client, key prefix and log; the log is printed
// when the test failed.
type Env struct {
	T      *testing.T
	RDB    *redis.Client
	Prefix string
	Log    *SyncBuffer
	Logger *slog.Logger
}

// New is an Env on the package's shared redis-server.
func New(t *testing.T) *Env { return NewOn(t, redistest.Shared(t)) }

// NewOn is an Env on srv.
func NewOn(t *testing.T, srv *redisserver.Server) *Env {
	t.Helper()
	e := &Env{T: t, RDB: redistest.Client(t, srv), Prefix: redistest.Prefix(t), Log: &SyncBuffer{}}
	e.Logger = slog.New(slog.NewTextHandler(e.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("library log:\n%s", e.Log.String())
		}
	})
	return e
}

// Client is a client on the Env's prefix, closed when the test ends.
func (e *Env) Client(opts ...rmq.Option) *rmq.Client {
	e.T.Helper()
	c, err := rmq.New(e.RDB, append([]rmq.Option{rmq.WithPrefix(e.Prefix), rmq.WithLogger(e.Logger)}, opts...)...)
	require.NoError(e.T, err)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.T.Errorf("close: %v", err)
		}
	})
	return c
}

// Start starts c within 10 s.
func (e *Env) Start(c *rmq.Client) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.T, c.Start(ctx))
}

// EventuallyQueues waits until tp's queues hold store, prepare and dead
// messages.
func (e *Env) EventuallyQueues(tp topic.Topic, store, prepare, dead int64) {
	e.T.Helper()
	insp := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix))
	deadline := time.Now().Add(WaitLong)
	for {
		st, err := insp.Stats(context.Background(), tp)
		require.NoError(e.T, err)
		if st.Store == store && st.Prepare == prepare && st.Dead == dead {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("%s: store/prepare/dead = %d/%d/%d, want %d/%d/%d", tp.Name(), st.Store, st.Prepare, st.Dead, store, prepare, dead)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
