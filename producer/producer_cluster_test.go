package producer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// clusterHook checks, for every script call on a cluster client, that its
// KEYS share one hash slot, and counts NOSCRIPT replies. With grouped (a
// single node, where one sendbatch or gsend call may carry several topic
// slots) it checks each slot group instead (rmqtest.SendGroups).
type clusterHook struct {
	grouped  bool
	mu       sync.Mutex
	bad      []string
	calls    atomic.Int64 // script calls that ran (not refused with NOSCRIPT)
	noScript atomic.Int64
}

func (h *clusterHook) before(cmd redis.Cmder) {
	if cmd.Name() != "evalsha" && cmd.Name() != "eval" {
		return
	}
	args := cmd.Args()
	n := int(args[2].(int))
	keys, argv := args[3:3+n], args[3+n:]
	groups := [][]any{keys}
	if h.grouped {
		sha, _ := rmqtest.ScriptSHA(cmd)
		switch rmqtest.ScriptName(sha) {
		case "sendbatch":
			groups = rmqtest.SendGroups(5, keys, argv)
		case "gsend":
			groups = rmqtest.SendGroups(7, keys, argv)
		}
	}
	for _, g := range groups {
		seen := map[int]bool{}
		for _, k := range g {
			seen[keyspace.HashSlot(fmt.Sprint(k))] = true
		}
		if len(seen) != 1 {
			h.mu.Lock()
			h.bad = append(h.bad, fmt.Sprint(g))
			h.mu.Unlock()
		}
	}
}
func (h *clusterHook) after(cmd redis.Cmder) {
	if cmd.Name() != "evalsha" && cmd.Name() != "eval" {
		return
	}
	if scripts.IsNoScript(cmd.Err()) {
		h.noScript.Add(1)
	} else {
		h.calls.Add(1)
	}
}
func (h *clusterHook) verify(t *testing.T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(t, h.bad, "script calls whose KEYS span hash slots")
}

func clusterSetup(t *testing.T, opts ...producer.Option) (*producer.Producer, *redis.ClusterClient, *clusterHook, string) {
	t.Helper()
	p, rdb, h, prefix := setupHooked(t, "cluster", opts...)
	return p, rdb.(*redis.ClusterClient), h, prefix
}

// storeSizes sums the store sizes of every slot of tp.
func storeSizes(t *testing.T, rdb redis.UniversalClient, prefix string, tp topic.Topic) (total int64) {
	t.Helper()
	for s := range tp.SlotAmount() {
		n, err := rdb.ZCard(context.Background(), keyspace.KeysFor(prefix, tp, s).Store).Result()
		require.NoError(t, err)
		total += n
	}
	return total
}

// On a cluster: a batch over 16 slots (one pipelined script call per slot,
// to three masters), concurrent single sends sharing group-commit flushes
// across slots, and Remove searching every slot.
func TestClusterSends(t *testing.T) {
	p, cc, h, prefix := clusterSetup(t)
	ctx := context.Background()
	tp := topic.MustNew("batch", topic.Priority, 16)

	ids, err := p.SendBatch(ctx, tp, priorityJobs(500))
	require.NoError(t, err)
	require.Len(t, ids, 500)
	assert.LessOrEqual(t, h.calls.Load(), int64(16), "one call per slot")
	assert.EqualValues(t, 500, storeSizes(t, cc, prefix, tp))

	ft := topic.MustNew("single", topic.FixedTime, 16)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				_, err := p.SendFixedTime(ctx, ft, []byte(fmt.Sprintf("m-%d-%d", g, i)), time.Now().Add(time.Hour))
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 200, storeSizes(t, cc, prefix, ft))

	// A body-derived id is looked for in every slot (a pipelined read).
	body := []byte("find me")
	id, err := p.SendFixedTime(ctx, ft, body, time.Now().Add(time.Hour))
	require.NoError(t, err)
	removed, err := p.Remove(ctx, ft, id)
	require.NoError(t, err)
	assert.Equal(t, producer.RemovedWaiting, removed)
	assert.EqualValues(t, 200, storeSizes(t, cc, prefix, ft))
}

// After the masters lost their scripts (a restart, or a replica promoted by
// a failover: Redis does not replicate SCRIPT LOAD), a pipelined batch gets
// NOSCRIPT on each slot, loads the scripts on every master and goes
// through, storing every message once. Not parallel: it flushes the
// scripts of the cluster shared by this package's tests.
func TestClusterBatchReloadsScripts(t *testing.T) {
	p, cc, h, prefix := clusterSetup(t)
	ctx := context.Background()
	tp := topic.MustNew("reload", topic.FixedTime, 16)
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.ScriptFlush(ctx).Err()
	}))
	_, err := p.SendBatch(ctx, tp, hourAhead(64))
	require.NoError(t, err)
	assert.Positive(t, h.noScript.Load(), "no NOSCRIPT: the scripts were not flushed?")
	assert.EqualValues(t, 64, storeSizes(t, cc, prefix, tp))
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ok, err := c.ScriptExists(ctx, scripts.SendBatch.Hash()).Result()
		if err == nil && !ok[0] {
			err = fmt.Errorf("%s: script not loaded", c.Options().Addr)
		}
		return err
	}))
}

// resultCounter counts the send results an Observer is told.
type resultCounter struct {
	mu  sync.Mutex
	got map[producer.SendResult]int
}

func (r *resultCounter) Sent(_ topic.Topic, result int) {
	res := producer.SendResult(result)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[producer.SendResult]int{}
	}
	r.got[res]++
}

func (r *resultCounter) Removed(topic.Topic, bool) {}

func (r *resultCounter) Before(_ context.Context, _ topic.Topic, _ string, _ []byte, h map[string]string) (map[string]string, func(string, error)) {
	return h, nil
}

// When only one master lost its scripts, only the calls sent there are
// refused; the calls that ran are not sent again, so every message reports
// what its one run did (stored), not a rerun's "duplicate". Not parallel:
// it flushes the scripts of a master shared by this package's tests.
func TestClusterReloadSendsOnlyRefusedCalls(t *testing.T) {
	results := &resultCounter{}
	p, cc, h, prefix := clusterSetup(t, withNotify(results))
	ctx := context.Background()
	tp := topic.MustNew("reloadone", topic.FixedTime, 16)
	require.NoError(t, scripts.Load(ctx, cc))
	var one sync.Once
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) (err error) {
		one.Do(func() { err = c.ScriptFlush(ctx).Err() }) // one master only
		return err
	}))
	_, err := p.SendBatch(ctx, tp, hourAhead(64))
	require.NoError(t, err)
	assert.Positive(t, h.noScript.Load(), "no NOSCRIPT: the scripts were not flushed?")
	assert.Equal(t, map[producer.SendResult]int{producer.SendStored: 64}, results.got)
	assert.EqualValues(t, 64, storeSizes(t, cc, prefix, tp))
}
