package scripts_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// lifeSlot drives the scripts with a slot's life keys (lifelib.lua).
type lifeSlot struct {
	*fenced
	lk keyspace.LifeKeys
}

func newLifeSlot(t *testing.T, typ int) *lifeSlot {
	f := newFenced(t, typ)
	prefix := f.k.Store[:len(f.k.Store)-len(":{t:0}:store")]
	return &lifeSlot{fenced: f, lk: keyspace.LifeKeysFor(prefix, "t", 0)}
}

func (s *lifeSlot) lifeKeys() []string {
	k := s.lk.Slice()
	return k[:]
}

// rollbackL rolls a delivery back with the life keys and an event log of
// 100; epoch > 0 fences the call.
func (s *lifeSlot) rollbackL(maxRetries int, id string, token int64, errText, how string, epoch int64) ([]int64, error) {
	keys := append(s.allKeys(), s.lifeKeys()...)
	args := []any{"PUBLISH", itoa(maxRetries) + "L", 0, 0, 1, 0, 100, id, token, errText, how}
	if epoch > 0 {
		keys, args = append(keys, s.epochKey), append(args, epoch)
	}
	return scripts.Rollback.Run(s.ctx, s.rdb, keys, args...).Int64Slice()
}

func (s *lifeSlot) sweepL(maxRetries int) []any {
	s.t.Helper()
	vals, err := scripts.Sweep.Run(s.ctx, s.rdb, append(s.allKeys(), s.lifeKeys()...), "PUBLISH", itoa(maxRetries)+"L", 0, 0, 1000, 1, 0, 100).Slice()
	require.NoError(s.t, err)
	return vals
}

func (s *lifeSlot) events() []map[string]any {
	s.t.Helper()
	xs, err := s.rdb.XRange(s.ctx, s.lk.Events, "-", "+").Result()
	require.NoError(s.t, err)
	out := make([]map[string]any, len(xs))
	for i, x := range xs {
		out[i] = x.Values
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// A failed attempt records "retried" with its error, the last one "dead",
// and the waiters of a dead message hear of it; a second run of the same
// rollback (a resent call) and a stale token record nothing.
func TestRollbackRecordsRetriedAndDeadOnce(t *testing.T) {
	s := newLifeSlot(t, 3)
	sub := s.rdb.Subscribe(s.ctx, s.lk.Finish)
	defer sub.Close()
	_, err := sub.Receive(s.ctx)
	require.NoError(t, err)
	require.NoError(t, s.rdb.HIncrBy(s.ctx, s.lk.Waiters, "m", 1).Err())

	s.send("m", past(), "body")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	res, err := s.rollbackL(1, "m", got[0].token, "first failure", "", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, res, "waits for a retry")
	res, err = s.rollbackL(1, "m", got[0].token, "first failure", "", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, res, "the resent call is refused")

	_, got = s.fetch(1, 30)
	require.Len(t, got, 1)
	res, err = s.rollbackL(1, "m", got[0].token+1, "stale", "", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, res)
	res, err = s.rollbackL(1, "m", got[0].token, "second failure", "", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{3}, res, "dead after its retries")

	assert.Equal(t, []map[string]any{
		{"t": "retried", "id": "m", "a": "1", "d": "first failure"},
		{"t": "dead", "id": "m", "a": "2", "d": "second failure"},
	}, s.events())
	msg, err := sub.ReceiveMessage(s.ctx)
	require.NoError(t, err)
	assert.Equal(t, "d1:msecond failure", msg.Payload)
}

// A lease that ran out is swept as a failed attempt: "retried", with the
// sweeper's error text.
func TestSweepRecordsRetried(t *testing.T) {
	s := newLifeSlot(t, 2)
	s.send("p", 100, "body")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	s.expire("p")
	vals := s.sweepL(16)
	require.Equal(t, int64(1), vals[0], "one rolled back")
	assert.Equal(t, []map[string]any{{"t": "retried", "id": "p", "a": "1", "d": "rmq: lease expired"}}, s.events())
	assert.Empty(t, s.sweepL(16)[3:], "a second sweep finds nothing")
	assert.Len(t, s.events(), 1)
}

// The life keys and the owner epoch key together: a stale epoch is
// refused with nothing recorded, the current one goes through.
func TestFencedRollbackWithLifeKeys(t *testing.T) {
	s := newLifeSlot(t, 3)
	_, err := s.takeover(7)
	require.NoError(t, err)
	s.send("f", past(), "body")
	got, err := s.fetchE(7, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = s.rollbackL(16, "f", got[0].token, "boom", "", 6)
	require.ErrorContains(t, err, "RMQFENCED")
	assert.Empty(t, s.events())
	res, err := s.rollbackL(16, "f", got[0].token, "boom", "", 7)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, res)
	assert.Equal(t, []map[string]any{{"t": "retried", "id": "f", "a": "1", "d": "boom"}}, s.events())
	n, err := s.rdb.Exists(s.ctx, s.lk.Done, s.lk.DoneQ).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a rollback keeps no record")
}
