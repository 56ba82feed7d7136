package scripts_test

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// Held deliveries: fetch.lua's mode 3 (a lookahead) moves time-based
// messages to prepare before they are due, with a held token; confirm.lua
// hands them over at their instant and release.lua gives them back. While
// held, a message counts as waiting in store for every other script.

func (s *slot) redisNowMs() int64 {
	s.t.Helper()
	return s.redisNowUs() / 1000
}

// fetchMode fetches one group, time-based, up to bound, with or without the
// lookahead (mode 3 or mode 1).
func (s *slot) fetchMode(n int, bound int64, lookahead bool) scripts.FetchReply {
	s.t.Helper()
	return s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: 30, Window: n + 8,
		Bound: strconv.FormatInt(bound, 10), Lookahead: lookahead,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n}}})
}

// heldItems turns a lookahead fetch's messages into held items, by id.
func heldItems(r scripts.FetchReply) map[string]scripts.HeldItem {
	out := map[string]scripts.HeldItem{}
	for _, m := range r.Msgs {
		out[m.ID] = scripts.HeldItem{ID: m.ID, Token: m.Token, Score: int64(m.Score)}
	}
	return out
}

func (s *slot) heldGroup(items []scripts.HeldItem) []scripts.HeldGroup {
	return []scripts.HeldGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake, Items: items}}
}

func (s *slot) confirmHeld(items ...scripts.HeldItem) scripts.ConfirmReply {
	s.t.Helper()
	keys, args := scripts.ConfirmArgs(s.heldGroup(items))
	vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseConfirmReply(vals, len(items))
	require.NoError(s.t, err)
	return r
}

func (s *slot) releaseHeld(items ...scripts.HeldItem) []int64 {
	s.t.Helper()
	keys, args := scripts.ReleaseArgs("PUBLISH", s.heldGroup(items))
	res, err := scripts.Release.Run(s.ctx, s.rdb, keys, args...).Int64Slice()
	require.NoError(s.t, err)
	require.Len(s.t, res, len(items))
	return res
}

// slotState is everything a slot holds, for "changes nothing" checks.
type slotState struct {
	Store, Prepare, Delayed, Dead []redis.Z
	Msg                           map[string]string
}

func (s *slot) state() slotState {
	s.t.Helper()
	z := func(key string) []redis.Z {
		v, err := s.rdb.ZRangeWithScores(s.ctx, key, 0, -1).Result()
		require.NoError(s.t, err)
		return v
	}
	msg, err := s.rdb.HGetAll(s.ctx, s.k.Msg).Result()
	require.NoError(s.t, err)
	return slotState{Store: z(s.k.Store), Prepare: z(s.k.Prepare), Delayed: z(s.k.Delayed), Dead: z(s.k.Dead), Msg: msg}
}

func (s *slot) zscore(key, id string) float64 {
	s.t.Helper()
	v, err := s.rdb.ZScore(s.ctx, key, id).Result()
	require.NoError(s.t, err, "%s in %s", id, key)
	return v
}

func (s *slot) rawEnvelope(id string) string {
	s.t.Helper()
	v, err := s.rdb.HGet(s.ctx, s.k.Msg, id).Result()
	require.NoError(s.t, err)
	return v
}

// sleepPast sleeps until Redis's clock is past dueMs (with a small margin):
// the scripts read the time from Redis, so its clock passing an instant is
// the event, and sleeping is how a test lets it pass. Every wait of this
// package's tests on the clock goes through here.
func (s *slot) sleepPast(dueMs int64) {
	s.t.Helper()
	if d := time.Duration(dueMs-s.redisNowMs()+15) * time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	require.Greater(s.t, s.redisNowMs(), dueMs)
}

// subscribeWake subscribes to the slot's wake channel and waits for the
// subscription to stand, so nothing published after it is missed.
func (s *slot) subscribeWake() *redis.PubSub {
	s.t.Helper()
	sub := s.rdb.Subscribe(s.ctx, s.k.Wake)
	s.t.Cleanup(func() { sub.Close() })
	_, err := sub.Receive(s.ctx)
	require.NoError(s.t, err)
	return sub
}

// wakeWithin returns the payload of the next wake-up, or false when none
// came within d.
func (s *slot) wakeWithin(sub *redis.PubSub, d time.Duration) (string, bool) {
	s.t.Helper()
	v, err := sub.ReceiveTimeout(s.ctx, d)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "", false
	}
	require.NoError(s.t, err)
	m, ok := v.(*redis.Message)
	require.True(s.t, ok, "unexpected pub/sub reply %T", v)
	require.Equal(s.t, s.k.Wake, m.Channel)
	return m.Payload, true
}

func ms(v int64) string { return strconv.FormatInt(v, 10) }

// lapse moves the lease deadline of id's prepare entry into the past,
// keeping its token: what a holder that died or stalled leaves behind.
func (s *slot) lapse(id string) {
	s.t.Helper()
	_, token := scripts.SplitPrepareScore(s.zscore(s.k.Prepare, id))
	past := float64((time.Now().Unix()-5)*1_000_000 + token)
	require.NoError(s.t, s.rdb.ZAdd(s.ctx, s.k.Prepare, redis.Z{Score: past, Member: id}).Err())
}

// prepareToken is the delivery token of id's prepare entry.
func (s *slot) prepareToken(id string) int64 {
	s.t.Helper()
	_, token := scripts.SplitPrepareScore(s.zscore(s.k.Prepare, id))
	return token
}

// Mode 3 takes messages up to a bound that lies after Redis's clock; mode 1
// with the same bound takes only what is due. A message not due yet gets a
// held token; one due already, an ordinary one.
func TestLookaheadFetchTakesUpToBound(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	// Nothing here sleeps: the margins are wide so no clock step matters.
	d0, d1, d2, bound := now-1_000, now+2_000, now+8_000, now+4_000
	s.send("z", float64(d0), "vz")
	s.send("a", float64(d1), "va")
	s.send("b", float64(d2), "vb")
	r := s.fetchMode(1, bound, false)
	require.Len(t, r.Msgs, 1)
	assert.Equal(t, "z", r.Msgs[0].ID)
	assert.False(t, scripts.IsHeld(r.Msgs[0].Token), "a due message is not held")
	require.EqualValues(t, 1, s.ack("z", r.Msgs[0].Token))
	before := s.state()

	r = s.fetchMode(10, bound, false)
	assert.Empty(t, r.Msgs, "mode 1 takes nothing not due, whatever the bound")
	assert.Equal(t, []float64{float64(d1)}, r.Heads)
	assert.Equal(t, before, s.state())

	r = s.fetchMode(10, bound, true)
	require.Len(t, r.Msgs, 1, "mode 3 takes exactly the message due up to the bound")
	m := r.Msgs[0]
	assert.Equal(t, "a", m.ID)
	assert.Equal(t, float64(d1), m.Score, "the reply carries the store score (its due ms)")
	assert.EqualValues(t, 1, m.Token%1000, "first attempt")
	assert.True(t, scripts.IsHeld(m.Token), "a message taken ahead of its instant is held")
	assert.Equal(t, []float64{float64(d2)}, r.Heads, "the store head is the second")
	assert.Zero(t, r.Expired)
	env, err := scripts.DecodeEnvelope([]byte(m.Envelope))
	require.NoError(t, err)
	assert.Equal(t, "va", string(env.Body))

	st := s.state()
	assert.Equal(t, []redis.Z{{Score: float64(d2), Member: "b"}}, st.Store)
	require.Len(t, st.Prepare, 1)
	assert.Equal(t, "a", st.Prepare[0].Member)
	deadline, token := scripts.SplitPrepareScore(st.Prepare[0].Score)
	assert.Equal(t, m.Token, token)
	assert.InDelta(t, now/1000+30, deadline, 2, "lease from now, not from the due time")
	assert.Equal(t, before.Msg, st.Msg, "envelopes untouched")

	// Nothing more up to the bound; mode 1 sees the second as head too.
	r = s.fetchMode(10, bound, true)
	assert.Empty(t, r.Msgs)
	assert.Equal(t, []float64{float64(d2)}, r.Heads)
	r = s.fetchMode(10, bound, false)
	assert.Empty(t, r.Msgs)
	assert.Equal(t, []float64{float64(d2)}, r.Heads)
	assert.Equal(t, st, s.state())
}

// In mode 3 a message's expiry is judged at its due time when that is
// later than now: one that expires before its instant is dropped.
func TestLookaheadFetchJudgesExpiryAtDue(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	s.sendOpts("x", float64(now+2_000), scripts.Options{ExpiresAtMs: now + 1_000}, "vx")
	s.sendOpts("y", float64(now+2_500), scripts.Options{ExpiresAtMs: now + 5_000}, "vy")
	r := s.fetchMode(10, now+3_000, true)
	require.Len(t, r.Msgs, 1)
	assert.Equal(t, "y", r.Msgs[0].ID)
	assert.Equal(t, 1, r.Expired)
	assert.Equal(t, where{}, s.where("x"), "dropped with its body")
	assert.Equal(t, where{prepare: true, msg: true}, s.where("y"))
	assert.Equal(t, []float64{-1}, r.Heads)
}

// confirm.lua: 2 before the instant (nothing changes), 1 at it with the
// handed-over token (the same again for a rerun), 0 for a wrong token or a
// delivery a send or a remove took back to store.
func TestConfirmCodes(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	due := now + 250
	for i, id := range []string{"a", "b", "w"} {
		require.EqualValues(t, 1, s.send(id, float64(due+int64(i)), "v-"+id))
	}
	fr := s.fetchMode(10, now+1_000, true)
	require.Len(t, fr.Msgs, 3)
	held := heldItems(fr)

	before := s.state()
	c := s.confirmHeld(held["a"], held["b"], held["w"])
	require.Less(t, c.NowUs, due*1000, "the test ran late: the confirm came after the due time")
	assert.Equal(t, []int64{2, 2, 2}, c.Codes)
	assert.Empty(t, c.Tokens)
	assert.Equal(t, before, s.state())

	require.EqualValues(t, 1, s.remove("b"), "a held message is removed as waiting")
	s.sleepPast(due + 2)

	// a is due: delivered with the handed-over token, same lease.
	dl, _ := scripts.SplitPrepareScore(s.zscore(s.k.Prepare, "a"))
	envA := s.rawEnvelope("a")
	c = s.confirmNonce("a-call", held["a"])
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	assert.GreaterOrEqual(t, c.NowUs, due*1000)
	require.Len(t, c.Tokens, 1)
	handed := c.Tokens[0]
	assert.Equal(t, held["a"].Token-scripts.HeldToken, handed)
	assert.False(t, scripts.IsHeld(handed))
	dl2, tok := scripts.SplitPrepareScore(s.zscore(s.k.Prepare, "a"))
	assert.Equal(t, dl, dl2, "the lease stays")
	assert.Equal(t, handed, tok)
	assert.Equal(t, envA, s.rawEnvelope("a"))
	// A rerun (its first reply lost) answers the same, changing nothing;
	// another call finds it handed over: gone.
	st := s.state()
	c = s.confirmNonce("a-call", held["a"])
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	assert.Equal(t, []int64{handed}, c.Tokens)
	assert.Equal(t, st, s.state())
	c = s.confirmHeld(held["a"])
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	assert.Equal(t, st, s.state())

	// b was removed while held: gone.
	c = s.confirmHeld(held["b"])
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	assert.Equal(t, where{}, s.where("b"))

	// A wrong token: gone, nothing changed; the right one still delivers.
	wrong := held["w"]
	wrong.Token += 1000
	st = s.state()
	c = s.confirmHeld(wrong)
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	assert.Equal(t, st, s.state())
	c = s.confirmHeld(held["w"])
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)

	// The delivered ones ack as usual, with their handed-over token only.
	assert.EqualValues(t, 0, s.ack("a", held["a"].Token), "the held token is no more the delivery's")
	assert.EqualValues(t, 1, s.ack("a", handed))
	assert.EqualValues(t, 1, s.ack("w", c.Tokens[0]))
	assert.Equal(t, where{}, s.where("a"))
}

// A send of a held id counts as one into a waiting message: a range-merge
// repeat merges (2: the held due time stays, the new body comes), a
// fixed-time re-send replaces (3: the new due time), each keeping the
// message's history (failures, first-sent time, last error), and the
// message waits in store again, waking the slot when it heads it; the
// holder's confirm then finds it gone.
func TestSendToHeldMergesOrReplaces(t *testing.T) {
	for _, typ := range []int{1, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newSlot(t, typ)
			score := past()
			if typ == 1 {
				score = 0
			}
			s.send("m", score, "v1")
			_, got := s.fetch(1, 30)
			require.Len(t, got, 1)
			require.EqualValues(t, 4, s.rollbackHow(16, 150, "m", got[0].token, ""))
			orig := s.envelope(s.k.Msg, "m")
			require.Equal(t, 1, orig.Failures)
			due := int64(s.zscore(s.k.Store, "m"))
			r := s.fetchMode(1, due+1_000, true)
			require.Len(t, r.Msgs, 1)
			h := heldItems(r)["m"]
			require.True(t, scripts.IsHeld(h.Token))
			require.EqualValues(t, 2, h.Token%1000)

			sub := s.subscribeWake()
			again, want := float64(due+100), int64(3)
			if typ == 1 {
				again, want = 300, 2
			}
			require.Equal(t, want, s.send("m", again, "v2"), "as into a waiting message")
			assert.Equal(t, where{store: true, msg: true}, s.where("m"), "waiting in store, not in prepare")
			e := s.envelope(s.k.Msg, "m")
			assert.Equal(t, "v2", string(e.Body))
			assert.Equal(t, orig.Failures, e.Failures, "failures kept")
			assert.Equal(t, orig.FirstSentMs, e.FirstSentMs, "first-sent time kept")
			assert.Equal(t, orig.LastError, e.LastError, "last error kept")
			stored := int64(s.zscore(s.k.Store, "m"))
			if typ == 1 {
				assert.Equal(t, due, stored, "a merge keeps the held due time")
			} else {
				assert.Equal(t, due+100, stored, "a re-send replaces the due time")
			}
			assert.EqualValues(t, stored, e.Score, "the envelope's score is the store score")
			payload, ok := s.wakeWithin(sub, 2*time.Second)
			require.True(t, ok, "no wake-up for the message heading the slot again")
			assert.Equal(t, ms(stored), payload)

			assert.Equal(t, []int64{scripts.HeldGone}, s.confirmHeld(h).Codes)
			assert.Equal(t, []int64{0}, s.releaseHeld(h))
			s.sleepPast(stored)
			_, got = s.fetch(1, 30)
			require.Len(t, got, 1)
			assert.EqualValues(t, 2, got[0].token%1000, "the attempt after one failure: the hold counted none")
			assert.Equal(t, "v2", string(got[0].env.Body))
		})
	}
}

// release.lua: a held delivery goes back to store at exactly its score, no
// attempt counted, waking the slot it heads; a rerun, a wrong token or one
// a send took back change nothing.
func TestReleaseCodes(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	d := now + 200
	require.EqualValues(t, 1, s.send("a", float64(d), "va"))
	require.EqualValues(t, 1, s.send("w", float64(d+5), "vw"))
	require.EqualValues(t, 1, s.send("c", float64(d+10), "vc"))
	envA := s.rawEnvelope("a")
	held := heldItems(s.fetchMode(10, now+1_000, true))
	require.Len(t, held, 3)

	sub := s.subscribeWake()
	assert.Equal(t, []int64{1}, s.releaseHeld(held["a"]))
	assert.Equal(t, where{store: true, msg: true}, s.where("a"))
	assert.Equal(t, float64(d), s.zscore(s.k.Store, "a"))
	assert.Equal(t, envA, s.rawEnvelope("a"), "no attempt counted")
	payload, ok := s.wakeWithin(sub, 2*time.Second)
	require.True(t, ok, "no wake-up for the released head")
	assert.Equal(t, ms(d), payload)

	before := s.state()
	assert.Equal(t, []int64{0}, s.releaseHeld(held["a"]), "run twice")
	assert.Equal(t, before, s.state())
	wrong := held["w"]
	wrong.Token += 1000
	assert.Equal(t, []int64{0}, s.releaseHeld(wrong))
	assert.Equal(t, before, s.state())

	// The right one: back in store behind a, so no wake-up.
	assert.Equal(t, []int64{1}, s.releaseHeld(held["w"]))
	assert.Equal(t, float64(d+5), s.zscore(s.k.Store, "w"))
	if p, ok := s.wakeWithin(sub, 150*time.Millisecond); ok {
		t.Errorf("wake-up %q for a release that does not head the slot", p)
	}

	// A re-send took c back to store: nothing left to release.
	require.EqualValues(t, 3, s.send("c", float64(now+3_600_000), "c2"))
	before = s.state()
	assert.Equal(t, []int64{0}, s.releaseHeld(held["c"]))
	assert.Equal(t, before, s.state())

	// Released ones are fetched as fresh: attempt 1.
	s.sleepPast(d + 5)
	_, got := s.fetch(10, 30)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].id)
	assert.Equal(t, "va", string(got[0].env.Body))
	assert.EqualValues(t, 1, got[0].token%1000, "the release counted no attempt")
	assert.Equal(t, "w", got[1].id)
	assert.EqualValues(t, 1, got[1].token%1000)
}

// One call carries several groups, of different topics: codes in order, a
// token per delivery; release takes handed-over deliveries back too.
func TestConfirmAndReleaseAcrossGroups(t *testing.T) {
	ft := newSlot(t, 3)
	rm := newSlot(t, 1)
	now := ft.redisNowMs()
	require.EqualValues(t, 1, ft.send("a", float64(now+150), "va"))
	require.EqualValues(t, 1, ft.send("b", float64(now+3_600_000), "vb"))
	require.EqualValues(t, 1, rm.send("m", 150, "m1"))
	require.EqualValues(t, 1, rm.send("k", 150, "k1"))
	fh := heldItems(ft.fetchMode(10, now+7_200_000, true))
	rh := heldItems(rm.fetchMode(10, now+1_000, true))
	require.Len(t, fh, 2)
	require.Len(t, rh, 2)
	require.EqualValues(t, 2, rm.send("m", 150, "m2"), "a repeat merges into the held message")
	ft.sleepPast(max(fh["a"].Score, rh["m"].Score, rh["k"].Score))

	groups := []scripts.HeldGroup{
		{Store: ft.k.Store, Prepare: ft.k.Prepare, Msg: ft.k.Msg, Wake: ft.k.Wake, Items: []scripts.HeldItem{fh["b"], fh["a"]}},
		{Store: rm.k.Store, Prepare: rm.k.Prepare, Msg: rm.k.Msg, Wake: rm.k.Wake, Items: []scripts.HeldItem{rh["k"], rh["m"]}},
	}
	keys, args := scripts.ConfirmArgs(groups)
	vals, err := scripts.Confirm.Run(ft.ctx, ft.rdb, keys, args...).Slice()
	require.NoError(t, err)
	c, err := scripts.ParseConfirmReply(vals, 4)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 1, 1, 0}, c.Codes, "b not due, a and k delivered, m taken back by its repeat")
	assert.Equal(t, []int64{fh["a"].Token - scripts.HeldToken, rh["k"].Token - scripts.HeldToken}, c.Tokens)

	// Release all of them (a Close): b, still held, and a and k, handed
	// over under their new tokens, go back to store; m is in store already.
	a, k := fh["a"], rh["k"]
	a.Token, k.Token = c.Tokens[0], c.Tokens[1]
	groups[0].Items[1], groups[1].Items[0] = a, k
	keys, args = scripts.ReleaseArgs("PUBLISH", groups)
	res, err := scripts.Release.Run(ft.ctx, ft.rdb, keys, args...).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1, 1, 0}, res)
	assert.Equal(t, float64(fh["b"].Score), ft.zscore(ft.k.Store, "b"))
	assert.Equal(t, float64(fh["a"].Score), ft.zscore(ft.k.Store, "a"))
	assert.Equal(t, float64(rh["m"].Score), rm.zscore(rm.k.Store, "m"))
	assert.Equal(t, float64(rh["k"].Score), rm.zscore(rm.k.Store, "k"))
	assert.Equal(t, "m2", string(rm.envelope(rm.k.Msg, "m").Body))
	for _, s := range []*slot{ft, rm} {
		n, err := s.rdb.ZCard(s.ctx, s.k.Prepare).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	}
}

// A held message whose lease runs out before it is handed over (its
// holder died or stalled) never ran: the sweeper puts it back in store at
// its score with no attempt counted, and the next fetch takes it as the
// same attempt. A handed-over one counts its attempt as usual.
func TestSweepGivesHeldBackWithoutAttempt(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	due := now + 300
	require.EqualValues(t, 1, s.send("h", float64(due), "vh"))
	require.EqualValues(t, 1, s.send("d", float64(due+1), "vd"))
	held := heldItems(s.fetchMode(10, now+1_000, true))
	require.Len(t, held, 2)
	s.sleepPast(due + 1)
	c := s.confirmHeld(held["d"])
	require.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	envH := s.rawEnvelope("h")
	s.lapse("h")
	s.lapse("d")
	sub := s.subscribeWake()
	assert.EqualValues(t, 2, s.sweep(16), "both leases rolled back")
	assert.Equal(t, where{store: true, msg: true}, s.where("h"))
	assert.Equal(t, float64(due), s.zscore(s.k.Store, "h"), "at its score")
	assert.Equal(t, envH, s.rawEnvelope("h"), "no attempt counted")
	_, ok := s.wakeWithin(sub, 2*time.Second)
	assert.True(t, ok, "the slot is woken")
	assert.Equal(t, 1, s.envelope(s.k.Msg, "d").Failures, "the handed-over one failed an attempt")
	_, got := s.fetch(10, 30)
	require.NotEmpty(t, got)
	assert.Equal(t, "h", got[0].id)
	assert.EqualValues(t, 1, got[0].token%1000, "still the first attempt")
}

// An ack or a nack by id (token -1) finds no delivery of a held message:
// it waits for its instant and never ran.
func TestByIDLeavesHeldAlone(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	require.EqualValues(t, 1, s.send("h", float64(now+60_000), "vh"))
	held := heldItems(s.fetchMode(10, now+120_000, true))
	require.Len(t, held, 1)
	before := s.state()
	assert.EqualValues(t, 0, s.ack("h", -1))
	assert.EqualValues(t, 0, s.rollback(16, "h", -1, "nack"))
	assert.Equal(t, before, s.state())
	assert.True(t, scripts.IsHeld(s.prepareToken("h")))
}
