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

func (s *lifeSlot) progress(id string, token int64, data string) int64 {
	s.t.Helper()
	n, err := scripts.Progress.Run(s.ctx, s.rdb, []string{s.k.Prepare, s.lk.Progress, s.lk.Events}, id, token, data, 100).Int64()
	require.NoError(s.t, err)
	return n
}

func (s *lifeSlot) cancel(id string, retention int64) int64 {
	s.t.Helper()
	keys := append([]string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Delayed, s.k.Wake}, s.lifeKeys()...)
	n, err := scripts.Cancel.Run(s.ctx, s.rdb, keys, id, "PUBLISH", retention, 100).Int64()
	require.NoError(s.t, err)
	return n
}

// ackL acks one delivery as a life group without retention or log.
func (s *lifeSlot) ackL(id string, token int64) int64 {
	s.t.Helper()
	keys := append([]string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed, s.k.Dead}, s.lifeKeys()...)
	res, err := scripts.Ack.Run(s.ctx, s.rdb, keys, "PUBLISH", "1L", 0, 0, id, token, "").Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

// Progress is stored for the current delivery only, with its token, and
// recorded as an event; it goes when the delivery ends.
func TestProgressOfTheCurrentDeliveryOnly(t *testing.T) {
	s := newLifeSlot(t, 3)
	s.send("m", past(), "body")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	tok := got[0].token
	require.Equal(t, int64(1), s.progress("m", tok, "50%"))
	require.Equal(t, int64(0), s.progress("m", tok+1, "stale"), "another delivery's token")
	require.Equal(t, int64(0), s.progress("other", tok, "unknown"))
	v, err := s.rdb.HGet(s.ctx, s.lk.Progress, "m").Result()
	require.NoError(t, err)
	assert.Equal(t, itoa(int(tok))+":50%", v)
	assert.Equal(t, []map[string]any{{"t": "progress", "id": "m", "a": "1", "d": "50%"}}, s.events())

	require.Equal(t, int64(1), s.ackL("m", tok))
	require.Equal(t, int64(0), s.progress("m", tok, "too late"), "the delivery ended")
	n, err := s.rdb.HLen(s.ctx, s.lk.Progress).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the ack cleared it")
}

// A waiting message is cancelled: gone, its record kept as cancelled, its
// waiters told, one event; a second cancel finds nothing.
func TestCancelWaiting(t *testing.T) {
	s := newLifeSlot(t, 3)
	require.NoError(t, s.rdb.HIncrBy(s.ctx, s.lk.Waiters, "w", 1).Err())
	sub := s.rdb.Subscribe(s.ctx, s.lk.Finish)
	defer sub.Close()
	_, err := sub.Receive(s.ctx)
	require.NoError(t, err)

	s.send("w", past()+3_600_000, "body")
	require.Equal(t, int64(1), s.cancel("w", 60_000))
	require.Equal(t, int64(0), s.cancel("w", 60_000), "cancelled already")
	assert.False(t, s.where("w").store)
	exists, err := s.rdb.HExists(s.ctx, s.k.Msg, "w").Result()
	require.NoError(t, err)
	assert.False(t, exists)
	assert.Equal(t, []map[string]any{{"t": "cancelled", "id": "w", "a": "0"}}, s.events())
	raw, err := s.rdb.HGet(s.ctx, s.lk.Done, "w").Bytes()
	require.NoError(t, err)
	assert.Equal(t, byte(2), raw[1], "kept as cancelled")
	msg, err := sub.ReceiveMessage(s.ctx)
	require.NoError(t, err)
	assert.Equal(t, "x1:w", msg.Payload)
}

// A running delivery is cancelled: its ack is refused afterwards (a handler
// that ignores its context cannot complete it), and the slot's wake channel
// tells the process running it, with the delivery's token.
func TestCancelRunning(t *testing.T) {
	s := newLifeSlot(t, 3)
	s.send("r", past(), "body")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	wake := s.rdb.Subscribe(s.ctx, s.k.Wake)
	defer wake.Close()
	_, err := wake.Receive(s.ctx)
	require.NoError(t, err)

	require.Equal(t, int64(4), s.cancel("r", 0))
	msg, err := wake.ReceiveMessage(s.ctx)
	require.NoError(t, err)
	assert.Equal(t, "x"+itoa(int(got[0].token))+":r", msg.Payload)
	assert.Equal(t, int64(0), s.ackL("r", got[0].token), "refused: cancelled")
	assert.Equal(t, []map[string]any{{"t": "cancelled", "id": "r", "a": "1"}}, s.events(), "and no completed event")
	n, err := s.rdb.Exists(s.ctx, s.lk.Done).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "no retention, no record")
}

// Cancelling an id that is nowhere writes nothing at all.
func TestCancelUnknownWritesNothing(t *testing.T) {
	s := newLifeSlot(t, 3)
	require.Equal(t, int64(0), s.cancel("nobody", 60_000))
	keys := append(s.allKeys(), s.lifeKeys()...)
	n, err := s.rdb.Exists(s.ctx, keys...).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}
