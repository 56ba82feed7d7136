package redistest_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

func TestSharedIsOneServer(t *testing.T) {
	t.Parallel()
	a, b := redistest.Shared(t), redistest.Shared(t)
	require.Same(t, a, b)
	rdb := redistest.Client(t, a)
	require.NoError(t, rdb.Ping(t.Context()).Err())
}

// Parallel tests on the shared server stay apart through their prefixes.
func TestSharedParallel(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Client(t, redistest.Shared(t))
			p := redistest.Prefix(t)
			for j := range 50 {
				require.NoError(t, rdb.Set(t.Context(), fmt.Sprintf("%s:%d", p, j), j, 0).Err())
			}
			require.Len(t, redistest.KeysWithPrefix(t, rdb, p), 50)
			require.NoError(t, rdb.Del(t.Context(), redistest.KeysWithPrefix(t, rdb, p)...).Err())
			redistest.CheckNoLeftoverKeys(t, rdb, p)
		})
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	p1, p2 := redistest.Prefix(t), redistest.Prefix(t)
	require.NotEqual(t, p1, p2)
	require.Regexp(t, `^t[a-z0-9]{8}-TestPrefix$`, p1)

	t.Run("odd name: with {tag} * and ü/", func(t *testing.T) {
		p := redistest.Prefix(t)
		require.Regexp(t, regexp.MustCompile(`^t[a-z0-9]{8}-[A-Za-z0-9._-]+$`), p)
		require.True(t, strings.HasSuffix(p, "-TestPrefix_odd_name__with__tag____and___"), p)
	})
	t.Run(strings.Repeat("x", 200), func(t *testing.T) {
		require.LessOrEqual(t, len(redistest.Prefix(t)), 70)
	})
}

func TestKeysWithPrefixEscapesGlob(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx := t.Context()
	p := redistest.Prefix(t)
	for _, k := range []string{p + "*a:1", p + "*a:2", p + "Xa:1", p + "[a]:1"} {
		require.NoError(t, rdb.Set(ctx, k, 1, 0).Err())
	}
	require.Equal(t, []string{p + "*a:1", p + "*a:2"}, redistest.KeysWithPrefix(t, rdb, p+"*a"))
	require.Equal(t, []string{p + "[a]:1"}, redistest.KeysWithPrefix(t, rdb, p+"[a]"))
	require.Len(t, redistest.KeysWithPrefix(t, rdb, p), 4)
	require.Empty(t, redistest.KeysWithPrefix(t, rdb, p+"nothing"))

	rec := &recordingTB{TB: t}
	redistest.CheckNoLeftoverKeys(rec, rdb, p)
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "4 leftover keys")

	require.NoError(t, rdb.Del(ctx, redistest.KeysWithPrefix(t, rdb, p)...).Err())
	redistest.CheckNoLeftoverKeys(t, rdb, p)
}

func TestDedicatedServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	require.NotEqual(t, redistest.Shared(t).Addr(), srv.Addr())
	rdb := redistest.Client(t, srv, func(o *redis.Options) { o.ClientName = "dedicated" })
	require.Equal(t, "dedicated", rdb.ClientGetName(t.Context()).Val())
	ctx := t.Context()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart(ctx))
	require.Equal(t, "v", rdb.Get(ctx, "k").Val())
}

func TestSharedCluster(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	require.Same(t, c, redistest.SharedCluster(t))
	cc := redistest.ClusterClient(t, c)
	ctx := t.Context()
	p := redistest.Prefix(t)
	var want []string
	for i := range 100 {
		k := fmt.Sprintf("%s:%03d", p, i)
		want = append(want, k)
		require.NoError(t, cc.Set(ctx, k, i, 0).Err())
	}
	require.Equal(t, want, redistest.KeysWithPrefix(t, cc, p))

	// The keys really live on several masters, so the scan had to visit each.
	var mu sync.Mutex
	holders := 0
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n := len(redistest.KeysWithPrefix(t, m, p))
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			holders++
		}
		return nil
	}))
	require.Equal(t, 3, holders)

	for _, k := range want {
		require.NoError(t, cc.Del(ctx, k).Err())
	}
	redistest.CheckNoLeftoverKeys(t, cc, p)
}

// recordingTB captures Errorf so a test can check what a helper reports.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Helper() {}

// sleeper parks in a select of its own, or blocks on a plain receive.
type sleeper struct{ stop chan struct{} }

func (s sleeper) inSelect(ctx context.Context) {
	select {
	case <-s.stop:
	case <-ctx.Done():
	}
}

func (s sleeper) inReceive(context.Context) { <-s.stop }

// Parked counts the goroutines of one function and labels, and tells
// those parked in its select from those blocked otherwise.
func TestParked(t *testing.T) {
	const inSelect = "github.com/rmq-go/rmq/internal/testkit/redistest_test.sleeper.inSelect"
	const inReceive = "github.com/rmq-go/rmq/internal/testkit/redistest_test.sleeper.inReceive"
	s := sleeper{stop: make(chan struct{})}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(s.stop)
	mine := pprof.WithLabels(t.Context(), pprof.Labels("test", t.Name()))
	other := pprof.WithLabels(t.Context(), pprof.Labels("test", "other"))
	for range 3 {
		wg.Go(func() { pprof.Do(mine, pprof.Labels("role", "a"), s.inSelect) })
	}
	wg.Go(func() { pprof.Do(other, pprof.Labels("role", "a"), s.inSelect) })
	wg.Go(func() { pprof.Do(mine, pprof.Labels("role", "a"), s.inReceive) })

	redistest.WaitParked(t, inSelect, map[string]string{"test": t.Name()}, 3)
	redistest.WaitParked(t, inSelect, nil, 4)
	parked, all := redistest.Parked(inReceive, map[string]string{"test": t.Name(), "role": "a"})
	require.Equal(t, 1, all)
	require.Zero(t, parked, "a plain receive is not a select")
	parked, all = redistest.Parked(inSelect, map[string]string{"test": "nobody"})
	require.Zero(t, parked+all)
}
