package scripts_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// fenced drives the ZooKeeper-mode variants of the scripts: every call names
// the slot's owner epoch key and an epoch.
type fenced struct {
	*slot
	epochKey string
}

func newFenced(t *testing.T, typ int) *fenced {
	s := newSlot(t, typ)
	// KeysFor built the keys from the same prefix and topic "t", slot 0.
	prefix := s.k.Store[:len(s.k.Store)-len(":{t:0}:store")]
	return &fenced{slot: s, epochKey: keyspace.EpochKey(prefix, "t", 0)}
}

func (f *fenced) takeover(epoch int64) ([]int64, error) {
	return scripts.Takeover.Run(f.ctx, f.rdb, []string{f.k.Store, f.k.Prepare, f.k.Msg, f.epochKey, f.k.Delayed}, epoch).Int64Slice()
}

func (f *fenced) fetchE(epoch int64, n int) ([]delivered, error) {
	keys, args := scripts.FetchCall{TimeBased: true, N: n, LeaseSec: 30, Window: n + 64,
		Groups:   []scripts.FetchGroup{{Store: f.k.Store, Prepare: f.k.Prepare, Msg: f.k.Msg, Max: n}},
		EpochKey: f.epochKey, Epoch: epoch}.Args()
	vals, err := scripts.Fetch.Run(f.ctx, f.rdb, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(f.t, err)
	out := deliveries(f.t, r)
	return out, nil
}

func (f *fenced) ackE(epoch int64, id string, token int64) ([]int64, error) {
	return scripts.Ack.Run(f.ctx, f.rdb, []string{f.k.Store, f.k.Prepare, f.k.Msg, f.k.Wake, f.k.Delayed, f.k.Dead, f.epochKey}, "PUBLISH", 1, id, token, epoch).Int64Slice()
}

func (f *fenced) rollbackE(epoch int64, id string, token int64) ([]int64, error) {
	args := append(f.rollbackArgs(16, 0, 0), id, token, "boom", "", epoch)
	return scripts.Rollback.Run(f.ctx, f.rdb, append(f.allKeys(), f.epochKey), args...).Int64Slice()
}

func (f *fenced) extendE(epoch int64, id string, token int64) ([]int64, error) {
	return scripts.Extend.Run(f.ctx, f.rdb, []string{f.k.Prepare, f.epochKey}, 30, id, token, epoch).Int64Slice()
}

func (f *fenced) sweepE(epoch int64) ([]any, error) {
	return scripts.Sweep.Run(f.ctx, f.rdb, append(f.allKeys(), f.epochKey), "PUBLISH", 16, 0, 0, 1000, 1, 0, epoch).Slice()
}

// A stale owner's fetch, ack, rollback, lease extension and sweep are all
// refused and change nothing; the current owner's go through.
func TestFencedScriptsRefuseAStaleEpoch(t *testing.T) {
	f := newFenced(t, 3)
	_, err := f.fetchE(5, 1)
	assert.True(t, scripts.IsFenced(err), "no owner yet: %v", err)

	res, err := f.takeover(5)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, res)
	f.send("a", past(), "v1")
	got, err := f.fetchE(5, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A new owner takes the slot over: the in-flight delivery goes back to
	// store at its original score, attempt not counted.
	res, err = f.takeover(9)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, res)
	assert.Equal(t, where{store: true, msg: true}, f.where("a"))
	score, err := f.rdb.ZScore(f.ctx, f.k.Store, "a").Result()
	require.NoError(t, err)
	assert.Equal(t, got[0].score, score, "back at its original due time")

	// Redelivered to the new owner with the same attempt number.
	again, err := f.fetchE(9, 10)
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.EqualValues(t, 1, again[0].token%1000, "the takeover counted no attempt")

	before := f.dumpSlot()
	for name, call := range map[string]func() error{
		"fetch":    func() error { _, err := f.fetchE(5, 10); return err },
		"ack":      func() error { _, err := f.ackE(5, "a", again[0].token); return err },
		"rollback": func() error { _, err := f.rollbackE(5, "a", again[0].token); return err },
		"extend":   func() error { _, err := f.extendE(5, "a", again[0].token); return err },
		"sweep":    func() error { _, err := f.sweepE(5); return err },
	} {
		err := call()
		assert.True(t, scripts.IsFenced(err), "%s with the stale epoch: %v", name, err)
	}
	assert.Equal(t, before, f.dumpSlot(), "the refused calls changed nothing")

	// The stale owner cannot take the slot back either.
	_, err = f.takeover(5)
	assert.True(t, scripts.IsFenced(err))
	assert.Equal(t, before, f.dumpSlot())

	// The current owner's calls work.
	ext, err := f.extendE(9, "a", again[0].token)
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, ext)
	acked, err := f.ackE(9, "a", again[0].token)
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, acked)
	assert.Equal(t, where{}, f.where("a"))
	_, err = f.sweepE(9)
	require.NoError(t, err)
}

// The fenced rollback keeps the plain semantics (attempt counted), and a
// takeover of a delivery superseded by a re-send drops the old delivery.
func TestFencedRollbackAndSupersededTakeover(t *testing.T) {
	f := newFenced(t, 3)
	_, err := f.takeover(1)
	require.NoError(t, err)
	f.send("a", past(), "v1")
	got, err := f.fetchE(1, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	res, err := f.rollbackE(1, "a", got[0].token)
	require.NoError(t, err)
	assert.Equal(t, []int64{4}, res)
	assert.Equal(t, 1, f.envelope(f.k.Msg, "a").Failures)

	got, err = f.fetchE(1, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.EqualValues(t, 2, got[0].token%1000)
	f.send("a", past(), "v2") // a re-send while the delivery runs
	res, err = f.takeover(2)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, res, "superseded by the waiting re-send")
	assert.Equal(t, where{store: true, msg: true}, f.where("a"))
	next, err := f.fetchE(2, 1)
	require.NoError(t, err)
	require.Len(t, next, 1)
	assert.Equal(t, "v2", string(next[0].env.Body))

	// Same epoch again: a new term of the same owner, safe to run twice.
	res, err = f.takeover(2)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0}, res)
	res, err = f.takeover(2)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, res)
}

// Epochs are ZooKeeper zxids: compared as integers, exactly, beyond 2^53.
func TestTakeoverComparesEpochsExactly(t *testing.T) {
	f := newFenced(t, 3)
	big := int64(1)<<60 + 1
	_, err := f.takeover(big)
	require.NoError(t, err)
	_, err = f.takeover(big - 1)
	assert.True(t, scripts.IsFenced(err), "one less than 2^60+1 is older: %v", err)
	_, err = f.takeover(999)
	assert.True(t, scripts.IsFenced(err), "fewer digits is older")
	_, err = f.takeover(big + 1)
	require.NoError(t, err)
	v, err := f.rdb.Get(f.ctx, f.epochKey).Int64()
	require.NoError(t, err)
	assert.Equal(t, big+1, v)
	_, err = scripts.Takeover.Run(f.ctx, f.rdb, []string{f.k.Store, f.k.Prepare, f.k.Msg, f.epochKey, f.k.Delayed}, "-3").Result()
	assert.Error(t, err)
	assert.False(t, scripts.IsFenced(err))
}

func (f *fenced) dumpSlot() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, k := range append(f.allKeys()[:5], f.epochKey) {
		v, err := f.rdb.Dump(f.ctx, k).Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(f.t, err)
		out[k] = v
	}
	return out
}

// A priority message re-sent with a not-before time while in flight waits in
// the delayed set; a takeover must drop the old delivery (superseded), not
// put the id in store too, where it would go before its time and again later.
func TestTakeoverSupersededByDelayedResend(t *testing.T) {
	f := newFenced(t, 2)
	_, err := f.takeover(1)
	require.NoError(t, err)
	f.send("a", 500, "v1")
	keys, args := scripts.FetchCall{N: 1, LeaseSec: 30, Window: 8, EpochKey: f.epochKey, Epoch: 1,
		Groups: []scripts.FetchGroup{{Store: f.k.Store, Prepare: f.k.Prepare, Msg: f.k.Msg, Max: 1, Delayed: f.k.Delayed, CheckDelayed: true}}}.Args()
	vals, err := scripts.Fetch.Run(f.ctx, f.rdb, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	require.Len(t, r.Msgs, 1)

	nb := time.Now().Add(time.Hour).UnixMilli()
	f.sendOpts("a", 900, scripts.Options{NotBeforeMs: nb}, "v2")
	require.Equal(t, where{prepare: true, msg: true, delayed: true}, f.where("a"))

	res, err := f.takeover(2)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, res, "superseded by the delayed re-send")
	assert.Equal(t, where{msg: true, delayed: true}, f.where("a"), "not in store before its time")
	assert.Equal(t, "v2", string(f.envelope(f.k.Msg, "a").Body))
}
