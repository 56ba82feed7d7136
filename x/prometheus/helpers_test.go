package rmqprom_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/redisserver"
	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The core module's internal packages are importable here: Go's internal
// rule is by import path, and github.com/rmq-go/rmq/x/prometheus lies under
// github.com/rmq-go/rmq.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

const waitLong = 15 * time.Second // for something that must happen

// syncBuffer is a bytes.Buffer safe for the library's goroutines to log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one test's Redis client, key prefix and log.
type env struct {
	t      *testing.T
	rdb    *redis.Client
	prefix string
	log    *syncBuffer
	logger *slog.Logger
}

func newEnv(t *testing.T) *env { return newEnvOn(t, redistest.Shared(t)) }

func newEnvOn(t *testing.T, srv *redisserver.Server) *env {
	t.Helper()
	e := &env{t: t, rdb: redistest.Client(t, srv), prefix: redistest.Prefix(t), log: &syncBuffer{}}
	e.logger = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("library log:\n%s", e.log.String())
		}
	})
	return e
}

// client is a client on the env's prefix, closed when the test ends.
func (e *env) client(opts ...rmq.Option) *rmq.Client {
	e.t.Helper()
	c, err := rmq.New(e.rdb, append([]rmq.Option{rmq.WithPrefix(e.prefix), rmq.WithLogger(e.logger)}, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.t.Errorf("close: %v", err)
		}
	})
	return c
}

func (e *env) start(c *rmq.Client) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.t, c.Start(ctx))
}

// eventuallyQueues waits until t's queues hold store, prepare and dead
// messages.
func (e *env) eventuallyQueues(tp topic.Topic, store, prepare, dead int64) {
	e.t.Helper()
	insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	deadline := time.Now().Add(waitLong)
	for {
		st, err := insp.Stats(context.Background(), tp)
		require.NoError(e.t, err)
		if st.Store == store && st.Prepare == prepare && st.Dead == dead {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: store/prepare/dead = %d/%d/%d, want %d/%d/%d", tp.Name(), st.Store, st.Prepare, st.Dead, store, prepare, dead)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustTopic(t *testing.T, name string, typ topic.Type, slotAmount int) topic.Topic {
	t.Helper()
	tp, err := topic.New(name, typ, slotAmount)
	require.NoError(t, err)
	return tp
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
