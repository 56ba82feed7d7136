package redisserver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// redirects counts the MOVED and ASK replies that node clients hand back to
// the ClusterClient, which follows them without telling its caller.
type redirects struct{ moved, ask atomic.Int64 }

func (r *redirects) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *redirects) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *redirects) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			switch {
			case strings.HasPrefix(err.Error(), "MOVED "):
				r.moved.Add(1)
			case strings.HasPrefix(err.Error(), "ASK "):
				r.ask.Add(1)
			}
		}
		return err
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	begin := time.Now()
	c, err := redisserver.StartCluster(ctx, redisserver.ClusterConfig{Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes() {
				t.Logf("log of %s:\n%s", n.Addr(), n.LogTail(15))
			}
		}
		require.NoError(t, c.Stop())
	})
	t.Logf("cluster up in %v", time.Since(begin))

	require.Len(t, c.Addrs(), 6)
	masters := c.MasterAddrs()
	require.Len(t, masters, 3)
	for _, m := range masters {
		require.Contains(t, c.Addrs(), m)
		require.NotNil(t, c.Node(m))
	}
	require.Nil(t, c.Node("127.0.0.1:1"))

	var redir redirects
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           c.Addrs(),
		DisableIdentity: true,
		NewClient: func(opt *redis.Options) *redis.Client {
			nc := redis.NewClient(opt)
			nc.AddHook(&redir)
			return nc
		},
	})
	t.Cleanup(func() { cc.Close() })

	t.Run("KeysSpreadOverMasters", func(t *testing.T) {
		for i := range 300 {
			require.NoError(t, cc.Set(ctx, fmt.Sprintf("spread:%d", i), i, 0).Err())
		}
		var mu sync.Mutex
		sizes := map[string]int64{}
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			mu.Lock()
			sizes[m.Options().Addr] = n
			mu.Unlock()
			return err
		}))
		require.Len(t, sizes, 3)
		for addr, n := range sizes {
			require.Positive(t, n, "master %s holds no keys", addr)
		}
		for _, k := range []string{"spread:1", "{mv}x", "foo", "123456789"} {
			require.Equal(t, int64(redisserver.KeySlot(k)), cc.ClusterKeySlot(ctx, k).Val(), k)
		}
	})

	// The slot of {mv} is moved while readers and a writer hammer it.
	slot := redisserver.KeySlot("{mv}")
	const nKeys = 400
	var target string

	t.Run("MoveSlotUnderLoad", func(t *testing.T) {
		for i := range nKeys {
			require.NoError(t, cc.Set(ctx, fmt.Sprintf("{mv}:%d", i), i, 0).Err())
		}
		from, err := c.SlotOwner(ctx, slot)
		require.NoError(t, err)
		for _, m := range c.MasterAddrs() {
			if m != from {
				target = m
				break
			}
		}

		// A flag, not a context, stops the load: a SET cut off by a
		// cancelled context may still have been applied, and the key count
		// below must match the writes we counted.
		var stopped atomic.Bool
		var wg sync.WaitGroup
		var reads, written atomic.Int64
		errs := make(chan error, 100)
		report := func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		for r := range 4 {
			wg.Go(func() {
				for i := r; !stopped.Load(); i = (i + 7) % nKeys {
					v, err := cc.Get(ctx, fmt.Sprintf("{mv}:%d", i)).Int()
					if err != nil {
						report(fmt.Errorf("GET {mv}:%d: %w", i, err))
					} else if v != i {
						report(fmt.Errorf("GET {mv}:%d = %d", i, v))
					}
					reads.Add(1)
				}
			})
		}
		wg.Go(func() {
			for i := 0; !stopped.Load(); i++ {
				if err := cc.Set(ctx, fmt.Sprintf("{mv}:w%d", i), i, 0).Err(); err != nil {
					report(fmt.Errorf("SET {mv}:w%d: %w", i, err))
					return
				}
				written.Add(1)
			}
		})

		// progress waits until the readers and the writer got through more
		// commands (or one of them failed: errs tells why below).
		progress := func(what string) {
			t.Helper()
			r0, w0 := reads.Load(), written.Load()
			require.Eventually(t, func() bool {
				return reads.Load() >= r0+200 && written.Load() >= w0+50 || len(errs) > 0
			}, redistest.WaitLong, time.Millisecond, "the load %s", what)
		}
		defer stopped.Store(true) // also when progress fails the test
		progress("is running before the move")
		begin := time.Now()
		require.NoError(t, c.MoveSlot(ctx, slot, target))
		t.Logf("moved slot %d from %s to %s in %v", slot, from, target, time.Since(begin))
		progress("keeps running after it")
		stopped.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("%d reads, %d writes during the move; redirects seen: %d MOVED, %d ASK",
			reads.Load(), written.Load(), redir.moved.Load(), redir.ask.Load())
		require.Positive(t, redir.moved.Load()+redir.ask.Load(), "client was never redirected")

		owner, err := c.SlotOwner(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, target, owner)

		// Every key is now on the target itself, not reachable only by
		// redirection.
		direct := client(t, target)
		others := 0 // keys of the first subtest that happen to share the slot
		for i := range 300 {
			if redisserver.KeySlot(fmt.Sprintf("spread:%d", i)) == slot {
				others++
			}
		}
		require.Equal(t, int64(nKeys+others)+written.Load(), direct.ClusterCountKeysInSlot(ctx, slot).Val())
		require.Equal(t, "7", direct.Get(ctx, "{mv}:7").Val())
		err = client(t, from).Get(ctx, "{mv}:7").Err()
		require.ErrorContains(t, err, "MOVED")

		require.NoError(t, c.MoveSlot(ctx, slot, target), "moving to the owner is a no-op")
		require.Error(t, c.MoveSlot(ctx, redisserver.NumSlots, target))
	})

	t.Run("Failover", func(t *testing.T) {
		require.NotEmpty(t, target)
		begin := time.Now()
		newMaster, err := c.Failover(ctx, target)
		require.NoError(t, err)
		t.Logf("failover %s -> %s in %v", target, newMaster, time.Since(begin))
		require.NotEqual(t, target, newMaster)

		masters := c.MasterAddrs()
		require.Len(t, masters, 3)
		require.Contains(t, masters, newMaster)
		require.NotContains(t, masters, target)
		role, err := client(t, target).Do(ctx, "ROLE").Slice()
		require.NoError(t, err)
		require.Equal(t, "slave", role[0])

		owner, err := c.SlotOwner(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, newMaster, owner)
		// The cluster client follows MOVED from the demoted master.
		for _, i := range []int{0, 7, nKeys - 1} {
			v, err := cc.Get(ctx, fmt.Sprintf("{mv}:%d", i)).Int()
			require.NoError(t, err)
			require.Equal(t, i, v)
		}
		require.NoError(t, cc.Set(ctx, "{mv}:after", "x", 0).Err())
	})

	t.Run("SuspendedReplicaIsIgnored", func(t *testing.T) {
		var replica *redisserver.Server
		for _, n := range c.Nodes() {
			if !slices.Contains(c.MasterAddrs(), n.Addr()) {
				replica = n
				break
			}
		}
		require.NotNil(t, replica)
		begin := time.Now()
		require.NoError(t, replica.Suspend())
		require.NoError(t, c.WaitHealthy(ctx))
		t.Logf("healthy without the suspended replica after %v", time.Since(begin))
		require.NoError(t, replica.Resume())
		require.NoError(t, c.WaitHealthy(ctx))
		t.Logf("replica back after %v", time.Since(begin))
	})

	t.Run("KillMasterAutomaticFailover", func(t *testing.T) {
		victim := c.MasterAddrs()[0]
		n := c.Node(victim)
		begin := time.Now()
		require.NoError(t, n.Kill())
		require.NoError(t, c.WaitHealthy(ctx))
		require.NotContains(t, c.MasterAddrs(), victim)
		t.Logf("automatic failover after kill took %v", time.Since(begin))

		require.NoError(t, n.Restart(ctx))
		require.NoError(t, c.WaitHealthy(ctx))
		require.Len(t, c.MasterAddrs(), 3)
		require.False(t, slices.Contains(c.MasterAddrs(), victim), "restarted node should rejoin as a replica")
		t.Logf("kill, failover and rejoin took %v", time.Since(begin))
	})
}
