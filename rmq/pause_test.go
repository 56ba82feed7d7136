package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// A Pause and a Resume that interleave (one's hash write, the other's, then
// their payloads in the other order) leave consumers in the state the hash
// holds, not the one the last payload names: consumers re-read the hash on
// every pause or resume payload. The payloads are published by hand here,
// as the interleaving would.
func TestPausePayloadsDoNotOverrideTheStoredState(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "pauserace", topic.FixedTime, 4)
	rec := newRecorder(nil)
	c := e.client()
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	pausedKey := keyspace.PausedKey(e.prefix)
	publish := func(payload string) {
		for s := range tp.SlotAmount() {
			require.NoError(t, e.rdb.Publish(ctx, e.keys(tp, s).Wake, payload).Err())
		}
	}

	// Pause's HSET, Resume's HDEL, Resume's "r", Pause's "p": not paused.
	require.NoError(t, e.rdb.HSet(ctx, pausedKey, tp.Name(), 1).Err())
	require.NoError(t, e.rdb.HDel(ctx, pausedKey, tp.Name()).Err())
	publish("r")
	publish("p")
	// The send's wake-up follows the payloads on its channel.
	send(t, c.Producer(), tp, "a", "b")
	require.Equal(t, "a", rec.next(t, 5*time.Second).ID, "not paused: the hash holds no pause")

	// Resume's HDEL, Pause's HSET, Pause's "p", Resume's "r": paused.
	require.NoError(t, e.rdb.HDel(ctx, pausedKey, tp.Name()).Err())
	require.NoError(t, e.rdb.HSet(ctx, pausedKey, tp.Name(), 1).Err())
	publish("p")
	publish("r")
	send(t, c.Producer(), tp, "b", "b")
	rec.none(t, time.Second)

	require.NoError(t, c.Inspector().Resume(ctx, tp))
	require.Equal(t, "b", rec.next(t, 5*time.Second).ID)
}
