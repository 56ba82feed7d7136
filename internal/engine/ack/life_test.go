package ack_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// lifeSlot is one slot of a fixed-time topic, with its life keys.
type lifeSlot struct {
	t    *testing.T
	rdb  *redis.Client
	k    keyspace.Keys
	lk   keyspace.LifeKeys
	mux  *ack.Mux
	sent int
}

func newLifeSlot(t *testing.T) *lifeSlot {
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	tp := topic.MustNew("life", topic.FixedTime, 1)
	return &lifeSlot{t: t, rdb: rdb, k: keyspace.KeysFor(prefix, tp, 0), lk: keyspace.LifeKeysFor(prefix, tp.Name(), 0), mux: ack.New(rdb, nil)}
}

// deliver sends ids, due now, and fetches them: their delivery tokens.
func (s *lifeSlot) deliver(ids ...string) map[string]int64 {
	s.t.Helper()
	ctx := context.Background()
	due := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	args := []any{"PUBLISH", 3, len(ids)}
	for _, id := range ids {
		s.sent++
		args = append(args, id, due, strconv.Itoa(s.sent), "body of "+id)
	}
	_, err := scripts.SendBatch.Run(ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed}, args...).Result()
	require.NoError(s.t, err)
	keys, fargs := scripts.FetchCall{N: len(ids), LeaseSec: 30, Window: 64, TimeBased: true,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: len(ids)}}}.Args()
	vals, err := scripts.Fetch.Run(ctx, s.rdb, keys, fargs...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(s.t, err)
	tok := map[string]int64{}
	for _, m := range r.Msgs {
		tok[m.ID] = m.Token
	}
	require.Len(s.t, tok, len(ids))
	return tok
}

// ack acks one delivery through the ack rounds, as a life group when
// retention, events or result ask for it.
func (s *lifeSlot) ack(id string, token, retention, events int64, result string) int64 {
	s.t.Helper()
	r := &ack.Req{Keys: [6]string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Store, s.k.Dead},
		ID: id, Token: token, Bound: 5 * time.Second,
		Life: s.lk.Slice(), HasLife: true, Retention: retention, Events: events, Result: []byte(result)}
	require.NoError(s.t, s.mux.Do(context.Background(), r))
	return r.Code
}

type record struct {
	state      int
	finishedAt int64
	result     string
	env        scripts.Envelope
}

func (s *lifeSlot) record(id string) (record, bool) {
	s.t.Helper()
	raw, err := s.rdb.HGet(context.Background(), s.lk.Done, id).Bytes()
	if err == redis.Nil {
		return record{}, false
	}
	require.NoError(s.t, err)
	require.GreaterOrEqual(s.t, len(raw), 12)
	require.Equal(s.t, byte(1), raw[0], "record version")
	n := int(binary.BigEndian.Uint32(raw[8:12]))
	env, err := scripts.DecodeEnvelope(raw[12+n:])
	require.NoError(s.t, err)
	var at [8]byte
	copy(at[2:], raw[2:8])
	return record{state: int(raw[1]), finishedAt: int64(binary.BigEndian.Uint64(at[:])), result: string(raw[12 : 12+n]), env: env}, true
}

func (s *lifeSlot) events() []redis.XMessage {
	s.t.Helper()
	xs, err := s.rdb.XRange(context.Background(), s.lk.Events, "-", "+").Result()
	require.NoError(s.t, err)
	return xs
}

// An ack of a retaining topic with an event log keeps the message's record
// with its result for the retention, and records one completed event; a
// second run of the same call (go-redis resends a call whose reply was
// lost) and a stale ack record nothing.
func TestAckKeepsRecordAndEventOnce(t *testing.T) {
	s := newLifeSlot(t)
	ctx := context.Background()
	tok := s.deliver("a1", "a2")
	before := time.Now().UnixMilli()

	require.Equal(t, int64(ack.Done), s.ack("a1", tok["a1"], 60_000, 100, "result of a1"))
	require.Equal(t, int64(ack.Gone), s.ack("a1", tok["a1"], 60_000, 100, "result of a1"), "a resent ack")
	require.Equal(t, int64(ack.Refused), s.ack("a2", tok["a2"]+1, 60_000, 100, "stale"), "a stale token")

	rec, ok := s.record("a1")
	require.True(t, ok)
	assert.Equal(t, 1, rec.state, "completed")
	assert.Equal(t, "result of a1", rec.result)
	assert.Equal(t, "body of a1", string(rec.env.Body))
	assert.InDelta(t, before, rec.finishedAt, 2000)
	_, ok = s.record("a2")
	assert.False(t, ok, "a refused ack keeps no record")

	until, err := s.rdb.ZScore(ctx, s.lk.DoneQ, "a1").Result()
	require.NoError(t, err)
	assert.Equal(t, float64(rec.finishedAt+60_000), until)
	for _, k := range []string{s.lk.Done, s.lk.DoneQ} {
		ttl, err := s.rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Second, k)
	}

	evs := s.events()
	require.Len(t, evs, 1, "one event for one completion")
	assert.Equal(t, map[string]any{"t": "completed", "id": "a1", "a": "1", "d": "result of a1"}, evs[0].Values)

	// a2 is still in flight: its real ack is recorded next, without data.
	require.Equal(t, int64(ack.Done), s.ack("a2", tok["a2"], 60_000, 100, ""))
	evs = s.events()
	require.Len(t, evs, 2)
	assert.Equal(t, map[string]any{"t": "completed", "id": "a2", "a": "1"}, evs[1].Values)
	exists, err := s.rdb.HExists(ctx, s.k.Msg, "a1").Result()
	require.NoError(t, err)
	assert.False(t, exists, "the body left the live hash")
}

// Without retention and event log, an ack writes nothing of the message's
// life: no key of it exists afterwards.
func TestAckWithoutRetentionWritesNoLife(t *testing.T) {
	s := newLifeSlot(t)
	tok := s.deliver("a")
	require.Equal(t, int64(ack.Done), s.ack("a", tok["a"], 0, 0, "ignored"))
	n, err := s.rdb.Exists(context.Background(), s.lk.Done, s.lk.DoneQ, s.lk.Events, s.lk.Waiters).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// Records whose retention ran out go as later acks come: the retained set
// does not grow without bound.
func TestAckTrimsLapsedRecords(t *testing.T) {
	s := newLifeSlot(t)
	ctx := context.Background()
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("old%d", i)
	}
	tok := s.deliver(ids...)
	for _, id := range ids {
		require.Equal(t, int64(ack.Done), s.ack(id, tok[id], 60_000, 0, "r"))
	}
	// Their time is up (moved into the past, as the clock would).
	for _, id := range ids {
		require.NoError(t, s.rdb.ZAdd(ctx, s.lk.DoneQ, redis.Z{Score: 1, Member: id}).Err())
	}
	tok = s.deliver("new1", "new2")
	require.Equal(t, int64(ack.Done), s.ack("new1", tok["new1"], 60_000, 0, "r"))
	require.Equal(t, int64(ack.Done), s.ack("new2", tok["new2"], 60_000, 0, "r"))
	n, err := s.rdb.HLen(ctx, s.lk.Done).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "only the records still in their time")
	left, err := s.rdb.ZRange(ctx, s.lk.DoneQ, 0, -1).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"new1", "new2"}, left)
}

// The event log keeps about the length it is given.
func TestAckEventLogIsBounded(t *testing.T) {
	s := newLifeSlot(t)
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
	}
	tok := s.deliver(ids...)
	for _, id := range ids {
		require.Equal(t, int64(ack.Done), s.ack(id, tok[id], 0, 10, ""))
	}
	n, err := s.rdb.XLen(context.Background(), s.lk.Events).Result()
	require.NoError(t, err)
	// MAXLEN ~ trims whole stream nodes (100 entries by default).
	assert.LessOrEqual(t, n, int64(110))
	assert.GreaterOrEqual(t, n, int64(10))
}

// A Wait registered for an id hears of its completion on the slot's
// finish channel, with the result, once; an id nobody waits for is not
// published.
func TestAckTellsWaiters(t *testing.T) {
	s := newLifeSlot(t)
	ctx := context.Background()
	sub := s.rdb.Subscribe(ctx, s.lk.Finish)
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, s.rdb.HIncrBy(ctx, s.lk.Waiters, "w:1", 1).Err())

	tok := s.deliver("w:1", "quiet")
	require.Equal(t, int64(ack.Done), s.ack("quiet", tok["quiet"], 0, 0, "q"))
	require.Equal(t, int64(ack.Done), s.ack("w:1", tok["w:1"], 0, 0, "the result"))

	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Equal(t, "c3:w:1the result", msg.Payload, "the first and only message: quiet's ack published nothing")
	n, err := s.rdb.HLen(ctx, s.lk.Waiters).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a finished id's waiters are forgotten")
}
