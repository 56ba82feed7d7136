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
// messages to prepare before they are due; confirm.lua hands them over at
// their instant and release.lua gives them back.

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

func (s *slot) heldArgs(items []scripts.HeldItem) ([]string, []any) {
	return scripts.HeldArgs("PUBLISH", []scripts.HeldGroup{{
		Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake,
		Merges: s.typ == 1, Items: items,
	}})
}

func (s *slot) confirmHeld(items ...scripts.HeldItem) scripts.ConfirmReply {
	s.t.Helper()
	keys, args := s.heldArgs(items)
	vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseConfirmReply(vals, len(items))
	require.NoError(s.t, err)
	return r
}

func (s *slot) releaseHeld(items ...scripts.HeldItem) []int64 {
	s.t.Helper()
	keys, args := s.heldArgs(items)
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

// Mode 3 takes messages up to a bound that lies after Redis's clock; mode 1
// with the same bound takes only what is due.
func TestLookaheadFetchTakesUpToBound(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	// Nothing here sleeps: the margins are wide so no clock step matters.
	d1, d2, bound := now+2_000, now+8_000, now+4_000
	s.send("a", float64(d1), "va")
	s.send("b", float64(d2), "vb")
	before := s.state()

	r := s.fetchMode(10, bound, false)
	assert.Empty(t, r.Msgs, "mode 1 takes nothing not due, whatever the bound")
	assert.Equal(t, []float64{float64(d1)}, r.Heads)
	assert.Equal(t, before, s.state())

	r = s.fetchMode(10, bound, true)
	require.Len(t, r.Msgs, 1, "mode 3 takes exactly the message due up to the bound")
	m := r.Msgs[0]
	assert.Equal(t, "a", m.ID)
	assert.Equal(t, float64(d1), m.Score, "the reply carries the store score (its due ms)")
	assert.EqualValues(t, 1, m.Token%1000, "first attempt")
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

func TestConfirmCodes(t *testing.T) {
	ft := newSlot(t, 3) // fixed-time
	rm := newSlot(t, 1) // range-merge
	now := ft.redisNowMs()
	due := now + 250
	// a: delivered; b: removed while held; c: re-sent while held;
	// w: confirmed with a wrong token.
	for i, id := range []string{"a", "b", "c", "w"} {
		require.EqualValues(t, 1, ft.send(id, float64(due+int64(i)), "v-"+id))
	}
	require.EqualValues(t, 1, rm.send("m", 250, "m1"))
	dm := int64(rm.zscore(rm.k.Store, "m"))
	require.GreaterOrEqual(t, dm, now+250)

	fr := ft.fetchMode(10, now+1_000, true)
	require.Len(t, fr.Msgs, 4)
	held := heldItems(fr)
	for i, id := range []string{"a", "b", "c", "w"} {
		require.Equal(t, id, fr.Msgs[i].ID, "consume order")
		require.Equal(t, due+int64(i), held[id].Score)
	}
	rr := rm.fetchMode(10, now+1_000, true)
	require.Len(t, rr.Msgs, 1)
	hm := heldItems(rr)["m"]
	require.Equal(t, dm, hm.Score)

	// Before the due time: 2 for each, and nothing changes.
	ftBefore, rmBefore := ft.state(), rm.state()
	c := ft.confirmHeld(held["a"], held["b"], held["c"], held["w"])
	require.Less(t, c.NowUs, due*1000, "the test ran late: the confirm came after the due time")
	assert.Equal(t, []int64{2, 2, 2, 2}, c.Codes)
	assert.Empty(t, c.Envelopes)
	c = rm.confirmHeld(hm)
	assert.Equal(t, []int64{2}, c.Codes)
	assert.Empty(t, c.Envelopes)
	assert.Equal(t, ftBefore, ft.state())
	assert.Equal(t, rmBefore, rm.state())

	// While held: b removed, c re-sent for later, m repeated.
	require.EqualValues(t, 4, ft.remove("b"), "removed in flight")
	resendDue := now + 3_600_000
	require.EqualValues(t, 4, ft.send("c", float64(resendDue), "c2"), "stored while in flight")
	require.EqualValues(t, 4, rm.send("m", 400, "m2"), "stored while in flight")
	require.Greater(t, int64(rm.zscore(rm.k.Store, "m")), dm)

	ft.sleepPast(due + 3)
	rm.sleepPast(dm)

	// a is due: delivered, its prepare entry unchanged.
	pa := ft.zscore(ft.k.Prepare, "a")
	envA := ft.rawEnvelope("a")
	c = ft.confirmHeld(held["a"])
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	assert.GreaterOrEqual(t, c.NowUs, due*1000)
	assert.Empty(t, c.Envelopes)
	assert.Equal(t, pa, ft.zscore(ft.k.Prepare, "a"), "the lease and token stay")
	assert.Equal(t, where{prepare: true, msg: true}, ft.where("a"))
	assert.Equal(t, envA, ft.rawEnvelope("a"))

	// b was removed: gone, and remove's tombstone is cleared (the held
	// delivery never ran, so no late ack of it can come).
	_, tok := scripts.SplitPrepareScore(ft.zscore(ft.k.Prepare, "b"))
	assert.Zero(t, tok, "remove's tombstone")
	c = ft.confirmHeld(held["b"])
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	assert.Equal(t, where{}, ft.where("b"))

	// A wrong token: gone, nothing changed; the right one still delivers.
	wrong := held["w"]
	wrong.Token += 1000
	before := ft.state()
	c = ft.confirmHeld(wrong)
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	assert.Equal(t, before, ft.state())
	c = ft.confirmHeld(held["w"])
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)

	// c was re-sent for later: superseded, the re-send waits in store and,
	// heading the slot, wakes it.
	sub := ft.subscribeWake()
	c = ft.confirmHeld(held["c"])
	assert.Equal(t, []int64{scripts.HeldSuperseded}, c.Codes)
	assert.Empty(t, c.Envelopes)
	assert.Equal(t, where{store: true, msg: true}, ft.where("c"), "prepare entry removed, store entry kept")
	assert.Equal(t, float64(resendDue), ft.zscore(ft.k.Store, "c"))
	assert.Equal(t, "c2", string(ft.envelope(ft.k.Msg, "c").Body), "the re-send's envelope")
	payload, ok := ft.wakeWithin(sub, 2*time.Second)
	require.True(t, ok, "no wake-up for the re-send heading the slot")
	assert.Equal(t, ms(resendDue), payload)

	// m was repeated: merged, the delivery takes the repeat's envelope and
	// keeps its prepare entry; the repeat leaves store.
	pm := rm.zscore(rm.k.Prepare, "m")
	c = rm.confirmHeld(hm)
	assert.Equal(t, []int64{scripts.HeldMerged}, c.Codes)
	require.Len(t, c.Envelopes, 1)
	envM2 := rm.rawEnvelope("m")
	assert.Equal(t, envM2, c.Envelopes[0], "the stored envelope")
	e, err := scripts.DecodeEnvelope([]byte(c.Envelopes[0]))
	require.NoError(t, err)
	assert.Equal(t, "m2", string(e.Body))
	assert.EqualValues(t, hm.Score, e.Score, "the held one's due time")
	assert.Equal(t, where{prepare: true, msg: true}, rm.where("m"), "store entry removed, prepare entry kept")
	// Same lease, a new token (same attempt).
	require.Len(t, c.Tokens, 1)
	dl, _ := scripts.SplitPrepareScore(pm)
	dl2, tok2 := scripts.SplitPrepareScore(rm.zscore(rm.k.Prepare, "m"))
	assert.Equal(t, dl, dl2)
	assert.Equal(t, c.Tokens[0], tok2)
	assert.NotEqual(t, hm.Token, tok2)
	assert.Equal(t, envM2, rm.rawEnvelope("m"))

	// Confirmed again, each says the same (a deliverable, the rest gone);
	// m under its old token is gone (a rerun whose first reply was lost),
	// under its new one deliverable.
	c = ft.confirmHeld(held["a"], held["b"], held["c"], wrong)
	assert.Equal(t, []int64{1, 0, 0, 0}, c.Codes)
	c = rm.confirmHeld(hm)
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes)
	hm2 := hm
	hm2.Token = tok2
	c = rm.confirmHeld(hm2)
	assert.Equal(t, []int64{scripts.HeldDeliver}, c.Codes, "the merged repeat is consumed")

	// The delivered ones ack as usual.
	assert.EqualValues(t, 1, ft.ack("a", held["a"].Token))
	assert.EqualValues(t, 1, ft.ack("w", held["w"].Token))
	assert.EqualValues(t, 1, rm.ack("m", hm2.Token))
	assert.Equal(t, where{}, rm.where("m"))
}

func TestReleaseCodes(t *testing.T) {
	ft := newSlot(t, 3) // fixed-time
	rm := newSlot(t, 1) // range-merge
	now := ft.redisNowMs()
	d := now + 200
	// a: released; w: wrong token, then released behind a; c: re-sent
	// while held.
	require.EqualValues(t, 1, ft.send("a", float64(d), "va"))
	require.EqualValues(t, 1, ft.send("w", float64(d+5), "vw"))
	require.EqualValues(t, 1, ft.send("c", float64(d+10), "vc"))
	// m: a repeat due later; n: a repeat due earlier.
	require.EqualValues(t, 1, rm.send("m", 200, "m1"))
	require.EqualValues(t, 1, rm.send("n", 2_000, "n1"))
	dm, dn := int64(rm.zscore(rm.k.Store, "m")), int64(rm.zscore(rm.k.Store, "n"))

	envA := ft.rawEnvelope("a")
	fr := ft.fetchMode(10, now+1_000, true)
	require.Len(t, fr.Msgs, 3)
	held := heldItems(fr)
	rr := rm.fetchMode(10, now+3_000, true)
	require.Len(t, rr.Msgs, 2)
	hr := heldItems(rr)
	require.Equal(t, dm, hr["m"].Score)
	require.Equal(t, dn, hr["n"].Score)

	// a back in store at exactly its score, unchanged, waking the slot it
	// heads (w and c are held).
	sub := ft.subscribeWake()
	assert.Equal(t, []int64{1}, ft.releaseHeld(held["a"]))
	assert.Equal(t, where{store: true, msg: true}, ft.where("a"))
	assert.Equal(t, float64(d), ft.zscore(ft.k.Store, "a"))
	assert.Equal(t, envA, ft.rawEnvelope("a"), "no attempt counted")
	payload, ok := ft.wakeWithin(sub, 2*time.Second)
	require.True(t, ok, "no wake-up for the released head")
	assert.Equal(t, ms(d), payload)

	// Run twice: 0, nothing more.
	before := ft.state()
	assert.Equal(t, []int64{0}, ft.releaseHeld(held["a"]))
	assert.Equal(t, before, ft.state())

	// A wrong token: 0, nothing changed.
	wrong := held["w"]
	wrong.Token += 1000
	assert.Equal(t, []int64{0}, ft.releaseHeld(wrong))
	assert.Equal(t, before, ft.state())

	// The right one: back in store behind a, so no wake-up.
	assert.Equal(t, []int64{1}, ft.releaseHeld(held["w"]))
	assert.Equal(t, where{store: true, msg: true}, ft.where("w"))
	assert.Equal(t, float64(d+5), ft.zscore(ft.k.Store, "w"))
	if p, ok := ft.wakeWithin(sub, 150*time.Millisecond); ok {
		t.Errorf("wake-up %q for a release that does not head the slot", p)
	}

	// A fixed-time re-send while held: 2, the re-send's score stands.
	resendDue := now + 3_600_000
	require.EqualValues(t, 4, ft.send("c", float64(resendDue), "c2"))
	assert.Equal(t, []int64{2}, ft.releaseHeld(held["c"]))
	assert.Equal(t, where{store: true, msg: true}, ft.where("c"))
	assert.Equal(t, float64(resendDue), ft.zscore(ft.k.Store, "c"))
	assert.Equal(t, "c2", string(ft.envelope(ft.k.Msg, "c").Body))
	assert.Equal(t, []int64{0}, ft.releaseHeld(held["c"]), "run twice")

	// A range-merge repeat due later while held: 2, the original (lower)
	// score stands, with the repeat's envelope; m heads its slot (n is
	// held), so the slot is woken.
	require.EqualValues(t, 4, rm.send("m", 400, "m2"))
	require.Greater(t, int64(rm.zscore(rm.k.Store, "m")), dm)
	rsub := rm.subscribeWake()
	assert.Equal(t, []int64{2}, rm.releaseHeld(hr["m"]))
	assert.Equal(t, where{store: true, msg: true}, rm.where("m"))
	assert.Equal(t, float64(dm), rm.zscore(rm.k.Store, "m"), "the lower of the two scores")
	assert.Equal(t, "m2", string(rm.envelope(rm.k.Msg, "m").Body))
	payload, ok = rm.wakeWithin(rsub, 2*time.Second)
	require.True(t, ok, "no wake-up for the released head")
	assert.Equal(t, ms(dm), payload)

	// A range-merge repeat due earlier while held: 2, the repeat's
	// (lower) score stands.
	require.EqualValues(t, 4, rm.send("n", 100, "n2"))
	dn2 := int64(rm.zscore(rm.k.Store, "n"))
	require.Less(t, dn2, dn)
	assert.Equal(t, []int64{2}, rm.releaseHeld(hr["n"]))
	assert.Equal(t, where{store: true, msg: true}, rm.where("n"))
	assert.Equal(t, float64(dn2), rm.zscore(rm.k.Store, "n"), "the lower of the two scores")
	assert.Equal(t, "n2", string(rm.envelope(rm.k.Msg, "n").Body))

	// Released ones are fetched as fresh: attempt 1.
	ft.sleepPast(d + 5)
	_, got := ft.fetch(10, 30)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].id)
	assert.Equal(t, float64(d), got[0].score)
	assert.Equal(t, "va", string(got[0].env.Body))
	assert.EqualValues(t, 1, got[0].token%1000, "the release counted no attempt")
	assert.Equal(t, "w", got[1].id)
	assert.EqualValues(t, 1, got[1].token%1000)
}

// One call carries several groups: codes come in order, envelopes one per
// merge.
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
	require.EqualValues(t, 4, rm.send("m", 150, "m2"))
	ft.sleepPast(max(fh["a"].Score, rh["m"].Score, rh["k"].Score))

	groups := []scripts.HeldGroup{
		{Store: ft.k.Store, Prepare: ft.k.Prepare, Msg: ft.k.Msg, Wake: ft.k.Wake, Items: []scripts.HeldItem{fh["b"], fh["a"]}},
		{Store: rm.k.Store, Prepare: rm.k.Prepare, Msg: rm.k.Msg, Wake: rm.k.Wake, Merges: true, Items: []scripts.HeldItem{rh["k"], rh["m"]}},
	}
	keys, args := scripts.HeldArgs("PUBLISH", groups)
	vals, err := scripts.Confirm.Run(ft.ctx, ft.rdb, keys, args...).Slice()
	require.NoError(t, err)
	c, err := scripts.ParseConfirmReply(vals, 4)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 1, 1, 4}, c.Codes)
	require.Len(t, c.Envelopes, 1)
	require.Len(t, c.Tokens, 1)
	e, err := scripts.DecodeEnvelope([]byte(c.Envelopes[0]))
	require.NoError(t, err)
	assert.Equal(t, "m2", string(e.Body))
	// The merged delivery has a new token; a rerun with the old one (its
	// reply lost) finds it gone.
	assert.NotEqual(t, rh["m"].Token, c.Tokens[0])
	assert.Equal(t, rh["m"].Token%1000, c.Tokens[0]%1000, "same attempt")
	again := []scripts.HeldGroup{{Store: rm.k.Store, Prepare: rm.k.Prepare, Msg: rm.k.Msg, Wake: rm.k.Wake, Merges: true, Items: []scripts.HeldItem{rh["m"]}}}
	akeys, aargs := scripts.HeldArgs("PUBLISH", again)
	avals, err := scripts.Confirm.Run(ft.ctx, ft.rdb, akeys, aargs...).Slice()
	require.NoError(t, err)
	ac, err := scripts.ParseConfirmReply(avals, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{scripts.HeldGone}, ac.Codes)
	m := rh["m"]
	m.Token = c.Tokens[0]
	groups[1].Items[1] = m
	keys, args = scripts.HeldArgs("PUBLISH", groups)

	// Release all: b (not yet delivered) back in store; a, k and m were
	// confirmed but are still held in prepare, so they go back too.
	res, err := scripts.Release.Run(ft.ctx, ft.rdb, keys, args...).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1, 1, 1}, res)
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

// Had a held message waited in store, a repeat (range-merge) or re-send
// (fixed-time) would have merged into it keeping its history: failures,
// first-sent time and last error (sendbatch.lua codes 2 and 3). A send that
// arrives while it is held is stored as a fresh in-flight re-send instead
// (code 4); release.lua (and confirm.lua) put the held delivery's failures
// back, so the retry count does not restart. Its first-sent time and last
// error are not in Redis any more: those stay the re-send's.
func TestReleaseKeepsHistoryOfHeldMessage(t *testing.T) {
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
			require.EqualValues(t, 2, h.Token%1000)
			again := float64(due + 100)
			if typ == 1 {
				again = 300
			}
			require.EqualValues(t, 4, s.send("m", again, "v2"))
			require.Equal(t, []int64{2}, s.releaseHeld(h))
			e := s.envelope(s.k.Msg, "m")
			assert.Equal(t, "v2", string(e.Body))
			assert.Equal(t, orig.Failures, e.Failures, "failures kept, as a merge into a waiting message keeps them")
			// (First-sent time and last error are the re-send's: the
			// held delivery's are not in Redis any more.)
			assert.Equal(t, s.zscore(s.k.Store, "m"), e.Score, "the envelope's score is the store score")
			s.sleepPast(int64(s.zscore(s.k.Store, "m")))
			_, got = s.fetch(1, 30)
			require.Len(t, got, 1)
			assert.EqualValues(t, 2, got[0].token%1000, "the attempt after one failure")
		})
	}
}

// A held id removed by id and then sent again: confirm (at the instant)
// and release (at a Close) each clear the remove's tombstone, which would
// otherwise keep the re-send blocked for a whole lease, and wake the slot
// for the re-send heading it.
func TestRemovedWhileHeldThenResentIsWoken(t *testing.T) {
	for _, viaConfirm := range []bool{true, false} {
		t.Run("confirm="+strconv.FormatBool(viaConfirm), func(t *testing.T) {
			ft := newSlot(t, 3)
			now := ft.redisNowMs()
			due := now + 100
			require.EqualValues(t, 1, ft.send("r", float64(due), "v1"))
			h := heldItems(ft.fetchMode(1, now+1_000, true))["r"]
			require.EqualValues(t, 4, ft.remove("r"), "removed in flight")
			again := now + 3_600_000
			require.EqualValues(t, 1, ft.send("r", float64(again), "v2"), "stored as new, blocked behind the tombstone")
			sub := ft.subscribeWake()
			if viaConfirm {
				ft.sleepPast(due)
				assert.Equal(t, []int64{scripts.HeldGone}, ft.confirmHeld(h).Codes)
			} else {
				assert.Equal(t, []int64{0}, ft.releaseHeld(h))
			}
			assert.Equal(t, where{store: true, msg: true}, ft.where("r"), "tombstone cleared, the re-send waits")
			payload, ok := ft.wakeWithin(sub, 2*time.Second)
			require.True(t, ok, "no wake-up for the re-send heading the slot")
			assert.Equal(t, ms(again), payload)
		})
	}
}
