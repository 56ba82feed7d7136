package life_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func finish(t *testing.T, ws *life.Wait) life.Finish {
	t.Helper()
	select {
	case f := <-ws.C:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no finish word")
		return life.Finish{}
	}
}

// numSub is how many subscribers a channel has (a plain or a shard
// channel).
func numSub(t *testing.T, rdb redis.UniversalClient, ch string) int64 {
	t.Helper()
	var n map[string]int64
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// Asked of the node that serves the channel's hash slot.
		node, err := cc.MasterForKey(context.Background(), ch)
		require.NoError(t, err)
		n, err = node.PubSubShardNumSub(context.Background(), ch).Result()
		require.NoError(t, err)
		return n[ch]
	} else {
		n, err = rdb.PubSubNumSub(context.Background(), ch).Result()
	}
	require.NoError(t, err)
	return n[ch]
}

// Any number of waits on a slot share one subscription; a wait is
// registered in the slot's waiters hash once Add returns, told its own
// id's finish word only, and the subscription goes with the last wait.
func testWaits(t *testing.T, rdb redis.UniversalClient, publish string) {
	ctx := context.Background()
	lk := keyspace.LifeKeysFor(redistest.Prefix(t), "w", 3)
	w := life.NewWaiter(rdb)
	defer w.Close()
	waits := make([]*life.Wait, 1000)
	for i := range waits {
		var err error
		waits[i], err = w.Add(ctx, lk, fmt.Sprintf("id%d", i%10))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), numSub(t, rdb, lk.Finish), "one subscription for every wait")
	n, err := rdb.HGet(ctx, lk.Waiters, "id3").Int()
	require.NoError(t, err)
	assert.Equal(t, 100, n)

	require.NoError(t, rdb.Do(ctx, publish, lk.Finish, "c3:id3the result").Err())
	for i, ws := range waits {
		if i%10 != 3 {
			continue
		}
		f := finish(t, ws)
		assert.Equal(t, life.Finish{ID: "id3", State: 'c', Data: []byte("the result")}, f)
	}
	for i, ws := range waits {
		if i%10 != 3 {
			select {
			case f := <-ws.C:
				t.Fatalf("wait %d was told %v", i, f)
			default:
			}
		}
		ws.Done()
	}
	require.Eventually(t, func() bool { return numSub(t, rdb, lk.Finish) == 0 }, 10*time.Second, 5*time.Millisecond,
		"the last wait's Done unsubscribed")
}

func TestWaits(t *testing.T) {
	testWaits(t, redistest.Client(t, redistest.Shared(t)), "PUBLISH")
}

func TestWaitsOnACluster(t *testing.T) {
	testWaits(t, redistest.ClusterClient(t, redistest.SharedCluster(t)), "SPUBLISH")
}

// After Redis restarts the subscription is made again and every wait is
// asked to read its state again (a word may have been missed); later
// words still arrive.
func TestWaitRechecksAfterARestart(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	lk := keyspace.LifeKeysFor(redistest.Prefix(t), "w", 0)
	w := life.NewWaiter(rdb)
	defer w.Close()
	ws, err := w.Add(context.Background(), lk, "m")
	require.NoError(t, err)
	defer ws.Done()

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart(context.Background()))
	select {
	case <-ws.Recheck:
	case <-time.After(20 * time.Second):
		t.Fatal("no recheck after the restart")
	}
	require.NoError(t, rdb.Publish(context.Background(), lk.Finish, "d1:mboom").Err())
	assert.Equal(t, life.Finish{ID: "m", State: 'd', Data: []byte("boom")}, finish(t, ws))
}

// A closed Waiter refuses new waits, and its goroutines are gone (the
// package's TestMain checks for leaks).
func TestWaiterClose(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	lk := keyspace.LifeKeysFor(redistest.Prefix(t), "w", 1)
	w := life.NewWaiter(rdb)
	ws, err := w.Add(context.Background(), lk, "m")
	require.NoError(t, err)
	w.Close()
	ws.Done()
	_, err = w.Add(context.Background(), lk, "m")
	assert.ErrorIs(t, err, life.ErrWaiterClosed)
}

func TestParseFinish(t *testing.T) {
	f, err := life.ParseFinish("x4:a:b:")
	require.NoError(t, err)
	assert.Equal(t, life.Finish{ID: "a:b:", State: 'x'}, f)
	for _, bad := range []string{"", "c", "q1:a", "c0:", "c5:ab", "cx:ab"} {
		_, err := life.ParseFinish(bad)
		assert.Error(t, err, bad)
	}
}
