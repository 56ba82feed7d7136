package scripts_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// sendOpts sends one message with an options block (a group typed +4).
func (s *slot) sendOpts(id string, score float64, o scripts.Options, body string) int64 {
	s.t.Helper()
	s.nonce++
	n, err := scripts.SendBatch.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed},
		"PUBLISH", s.typ+4, 1, id, strconv.FormatFloat(score, 'f', -1, 64), strconv.Itoa(s.nonce), scripts.EncodeOptions(o), body).Int64Slice()
	require.NoError(s.t, err)
	return n[0]
}

// rollbackHow rolls back with a handler's directive and a backoff.
func (s *slot) rollbackHow(maxRetries int, backoffMs int64, id string, token int64, how string) int64 {
	s.t.Helper()
	args := append(s.rollbackArgs(maxRetries, backoffMs, 0), id, token, "boom", how)
	res, err := scripts.Rollback.Run(s.ctx, s.rdb, s.allKeys(), args...).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

// fetchDelayed fetches with the delayed set looked at (priority).
func (s *slot) fetchDelayed(n int) scripts.FetchReply {
	s.t.Helper()
	return s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: 30, Window: n + 4,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n, Delayed: s.k.Delayed, CheckDelayed: true}}})
}

func (s *slot) redisNowUs() int64 {
	s.t.Helper()
	now, err := s.rdb.Time(s.ctx).Result()
	require.NoError(s.t, err)
	return now.UnixMicro()
}

// Envelopes written by earlier releases (version 1) still decode, deliver,
// ack, and roll back (rewritten as version 2).
func TestVersion1EnvelopesStillDeliver(t *testing.T) {
	for _, typ := range []int{2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newSlot(t, typ)
			score := past()
			if typ == 2 {
				score = 500
			}
			for _, id := range []string{"a", "b"} {
				v1 := scripts.EncodeEnvelopeV1(scripts.Envelope{Type: typ, Failures: 1, FirstSentMs: past(), Score: score, OrigScore: score, Nonce: 7, LastError: "earlier", Body: []byte("old-" + id)})
				require.Equal(t, byte(1), v1[0])
				require.NoError(t, s.rdb.HSet(s.ctx, s.k.Msg, id, v1).Err())
				require.NoError(t, s.rdb.ZAdd(s.ctx, s.k.Store, redis.Z{Score: score, Member: id}).Err())
			}
			_, got := s.fetch(2, 30)
			require.Len(t, got, 2)
			for _, d := range got {
				assert.Equal(t, 1, d.env.Version)
				assert.Equal(t, "old-"+d.id, string(d.env.Body))
				assert.Equal(t, "earlier", d.env.LastError)
				assert.EqualValues(t, 2, d.token%1000, "attempt follows the stored failures")
			}
			byID := map[string]delivered{got[0].id: got[0], got[1].id: got[1]}
			require.EqualValues(t, 1, s.ack("a", byID["a"].token))
			assert.Equal(t, where{}, s.where("a"))
			require.EqualValues(t, 4, s.rollback(16, "b", byID["b"].token, "again"))
			e := s.envelope(s.k.Msg, "b")
			assert.Equal(t, 2, e.Version, "rewritten in the new format")
			assert.Equal(t, "old-b", string(e.Body))
			assert.Equal(t, 2, e.Failures)
			assert.Equal(t, "again", e.LastError)
			assert.Equal(t, float64(7), e.Nonce)
		})
	}
}

// A fresh message without options carries a 24-byte header; options,
// written by Go and read by Lua, survive a retry.
func TestEnvelopeVersion2(t *testing.T) {
	s := newSlot(t, 3)
	s.send("plain", past(), "0123456789")
	raw, err := s.rdb.HGet(s.ctx, s.k.Msg, "plain").Bytes()
	require.NoError(t, err)
	assert.Len(t, raw, 24+10, "header of a message without options")

	o := scripts.Options{MaxRetries: 3, HasMaxRetries: true, ExpiresAtMs: time.Now().Add(time.Hour).UnixMilli(), TimeoutMs: 1500,
		Headers: map[string]string{"traceparent": "00-abc-01", "k": ""}}
	s.sendOpts("opt", past(), o, "body")
	_, got := s.fetch(2, 30)
	require.Len(t, got, 2)
	for _, d := range got {
		if d.id == "opt" {
			assert.Equal(t, o, d.env.Options)
			require.EqualValues(t, 4, s.rollback(16, "opt", d.token, "x"))
		}
	}
	e := s.envelope(s.k.Msg, "opt")
	assert.Equal(t, o, e.Options, "options survive a retry")
	assert.Equal(t, "body", string(e.Body))
	// The Go writer and the Lua writer agree.
	assert.Equal(t, scripts.EncodeEnvelope(e), []byte(s.rdb.HGet(s.ctx, s.k.Msg, "opt").Val()))
}

// Never early: a range-merge window starts from Redis's ms rounded up.
func TestRangeWindowNeverEndsEarly(t *testing.T) {
	s := newSlot(t, 1)
	for i := range 50 {
		before := s.redisNowUs()
		id := "r" + strconv.Itoa(i)
		s.send(id, 3, "b")
		score, err := s.rdb.ZScore(s.ctx, s.k.Store, id).Result()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, int64(score)*1000, before+3000, "due before send + window")
	}
}

// A priority message with a not-before time waits in the delayed set, then
// competes by priority; a retry with a backoff waits there too and then
// ranks below fresh messages.
func TestDelayedPriority(t *testing.T) {
	s := newSlot(t, 2)
	nb := time.Now().Add(300 * time.Millisecond).UnixMilli()
	require.EqualValues(t, 1, s.sendOpts("later", 900, scripts.Options{NotBeforeMs: nb}, "l"))
	s.send("now", 100, "n")
	assert.Equal(t, where{msg: true, delayed: true}, s.where("later"), "not in store")
	d, err := s.rdb.ZScore(s.ctx, s.k.Delayed, "later").Result()
	require.NoError(t, err)
	assert.EqualValues(t, nb, d)

	r := s.fetchDelayed(5)
	got := deliveries(t, r)
	require.Len(t, got, 1)
	assert.Equal(t, "now", got[0].id)
	assert.EqualValues(t, nb, r.DelayedHeads[0])

	s.sleepPast(nb + 1)
	s.send("low", 50, "x")
	r = s.fetchDelayed(5)
	got = deliveries(t, r)
	require.Len(t, got, 2)
	assert.Equal(t, "later", got[0].id, "competes by its priority once due")
	assert.Equal(t, "low", got[1].id)
	assert.EqualValues(t, -1, r.DelayedHeads[0])

	// A retry with a backoff waits in the delayed set.
	require.EqualValues(t, 4, s.rollbackHow(16, 200, "later", got[0].token, ""))
	due, err := s.rdb.ZScore(s.ctx, s.k.Delayed, "later").Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Now().UnixMilli()+200), due, 100)
	assert.Equal(t, 1, s.envelope(s.k.Msg, "later").Failures)
	assert.Empty(t, deliveries(t, s.fetchDelayed(5)))
	s.sleepPast(int64(due) + 1)
	s.send("fresh", 17, "f")
	got = deliveries(t, s.fetchDelayed(5))
	require.Len(t, got, 2)
	assert.Equal(t, "fresh", got[0].id, "a retry ranks below every fresh message")
	assert.Equal(t, "later", got[1].id)
	assert.EqualValues(t, 2, got[1].token%1000)
}

// An expired message is dropped where it is touched: fetch, sweep, requeue.
func TestExpiredMessagesAreDropped(t *testing.T) {
	s := newSlot(t, 3)
	soon := time.Now().Add(50 * time.Millisecond).UnixMilli()
	s.sendOpts("f", past(), scripts.Options{ExpiresAtMs: soon}, "x")
	s.sendOpts("s", past(), scripts.Options{ExpiresAtMs: soon}, "x")
	s.sendOpts("r", past(), scripts.Options{ExpiresAtMs: soon, MaxRetries: 0, HasMaxRetries: true}, "x")
	s.sendOpts("keep", past(), scripts.Options{ExpiresAtMs: time.Now().Add(time.Hour).UnixMilli()}, "x")
	// Take s and r before they expire.
	_, got := s.fetchWindow(4, 30, 10)
	require.Len(t, got, 4)
	tok := map[string]int64{}
	for _, d := range got {
		tok[d.id] = d.token
	}
	require.EqualValues(t, 3, s.rollbackHow(16, 0, "r", tok["r"], ""), "its own max retries: dead at once")
	require.EqualValues(t, 4, s.rollbackHow(16, 0, "f", tok["f"], ""))
	require.EqualValues(t, 1, s.ack("keep", tok["keep"]))
	s.sleepPast(soon + 1)

	r := s.fetchGroups(scripts.FetchCall{N: 5, LeaseSec: 30, Window: 9, Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: 5}}})
	assert.Empty(t, r.Msgs, "an expired message is never delivered")
	assert.Equal(t, 1, r.Expired)
	assert.Equal(t, where{}, s.where("f"), "dropped with its body")

	s.expire("s")
	vals, err := scripts.Sweep.Run(s.ctx, s.rdb, s.allKeys(), "PUBLISH", 16, 0, 0, 1000, 1, 0).Slice()
	require.NoError(t, err)
	assert.EqualValues(t, []any{int64(0), int64(0), int64(1)}, vals[:3], "swept: expired, not retried")
	assert.Equal(t, where{}, s.where("s"))

	res, err := scripts.Requeue.Run(s.ctx, s.rdb, append(s.allKeys()[:6], s.k.Delayed), "PUBLISH", 99, 0, 0, "r").Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, []int64{8}, res, "requeue drops an expired dead message")
	assert.Equal(t, where{}, s.where("r"))
}

// What a handler asks for: dead now, a retry after a delay, a snooze that
// counts no attempt (bounded).
func TestRollbackDirectives(t *testing.T) {
	s := newSlot(t, 3)
	s.send("d", past(), "x")
	_, got := s.fetch(1, 30)
	require.EqualValues(t, 3, s.rollbackHow(16, 0, "d", got[0].token, "d"), "dead at the first attempt")
	assert.Equal(t, where{dead: true, deadmsg: true}, s.where("d"))

	s.send("r", past(), "x")
	_, got = s.fetch(1, 30)
	before := s.redisNowUs()
	require.EqualValues(t, 4, s.rollbackHow(16, 0, "r", got[0].token, "r5000"))
	score, err := s.rdb.ZScore(s.ctx, s.k.Store, "r").Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, int64(score)*1000, before+5_000_000, "not before the delay")
	assert.Less(t, int64(score)*1000, before+6_000_000)
	assert.Equal(t, 1, s.envelope(s.k.Msg, "r").Failures, "an attempt counted")

	s.send("s", past(), "x")
	for i := 1; i <= 101; i++ {
		require.NoError(t, s.rdb.ZAdd(s.ctx, s.k.Store, redis.Z{Score: past(), Member: "s"}).Err())
		_, got = s.fetch(1, 30)
		require.Len(t, got, 1)
		if i <= 100 {
			require.EqualValues(t, 1, got[0].token%1000, "snooze %d: no attempt counted", i)
			require.EqualValues(t, 6, s.rollbackHow(16, 0, "s", got[0].token, "s10"))
			assert.Equal(t, i, s.envelope(s.k.Msg, "s").Options.Snoozes)
		} else {
			require.EqualValues(t, 4, s.rollbackHow(16, 0, "s", got[0].token, "s10"), "past the bound a snooze counts")
			assert.Equal(t, 1, s.envelope(s.k.Msg, "s").Failures)
		}
	}
}

// Remove finds a message wherever it is; a removed delivery's late ack is
// refused and nothing is redelivered.
func TestRemoveAnywhere(t *testing.T) {
	s := newSlot(t, 2)
	s.send("w", 100, "x")
	s.sendOpts("d", 100, scripts.Options{NotBeforeMs: time.Now().Add(time.Hour).UnixMilli()}, "x")
	s.send("f", 200, "x")
	_, got := s.fetch(1, 30)
	require.Equal(t, "f", got[0].id)
	assert.EqualValues(t, 1, s.remove("w"))
	assert.EqualValues(t, 2, s.remove("d"))
	assert.EqualValues(t, 4, s.remove("f"))
	assert.EqualValues(t, 0, s.remove("f"), "twice")
	assert.EqualValues(t, 0, s.ack("f", got[0].token), "the late ack is refused, not 'gone'")
	s.expire("f")
	assert.EqualValues(t, 0, s.sweep(16), "the tombstone is cleared, nothing redelivered")
	assert.Equal(t, where{}, s.where("f"))
	for _, id := range []string{"w", "d"} {
		assert.Equal(t, where{}, s.where(id))
	}
}

// A late ack of a delivery the sweeper dead-lettered after its lease ran
// out is refused (0), not "gone" (2, which callers count as acked); an id
// that is nowhere at all is still gone.
func TestLateAckOfDeadLetteredDeliveryIsRefused(t *testing.T) {
	for _, typ := range []int{2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newSlot(t, typ)
			s.send("a", past(), "x")
			_, got := s.fetch(1, 30)
			require.Len(t, got, 1)
			s.expire("a")
			require.EqualValues(t, 1, s.sweep(0), "no retries: the lease's end dead-letters it")
			require.Equal(t, where{dead: true, deadmsg: true}, s.where("a"))
			assert.EqualValues(t, 0, s.ack("a", got[0].token), "refused, not gone")
			assert.Equal(t, where{dead: true, deadmsg: true}, s.where("a"))
			assert.EqualValues(t, 2, s.ack("never", 1001), "nowhere at all: gone")
		})
	}
}

// Removing an in-flight delivery leaves a tombstone for as long as the
// delivery's lease (its deadline second, token 0), not a fixed two seconds:
// until then a sweep keeps it and the running delivery's late ack is
// refused; once that lease has run out the sweeper clears it.
func TestRemoveInFlightTombstoneKeepsTheLease(t *testing.T) {
	s := newSlot(t, 3)
	s.send("a", past(), "x")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	// A lease deadline well beyond two seconds, set exactly.
	deadline := time.Now().Unix() + 100
	require.NoError(t, s.rdb.ZAdd(s.ctx, s.k.Prepare, redis.Z{Score: float64(deadline*scripts.TokenMod + got[0].token%scripts.TokenMod), Member: "a"}).Err())

	require.EqualValues(t, 4, s.remove("a"))
	score, err := s.rdb.ZScore(s.ctx, s.k.Prepare, "a").Result()
	require.NoError(t, err)
	sec, tok := scripts.SplitPrepareScore(score)
	assert.Equal(t, deadline, sec, "the tombstone keeps the delivery's lease deadline")
	assert.EqualValues(t, 0, tok)

	assert.EqualValues(t, 0, s.sweep(16))
	assert.Equal(t, where{prepare: true}, s.where("a"), "kept while the lease lasts")
	assert.EqualValues(t, 0, s.ack("a", got[0].token), "refused, not gone")

	s.expire("a")
	assert.EqualValues(t, 0, s.sweep(16), "nothing redelivered")
	assert.Equal(t, where{}, s.where("a"), "cleared once the lease ran out")
}
