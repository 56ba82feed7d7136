package scripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// A delivery token is a salt of 500 values and the attempt: two deliveries
// of one id may share one. confirm.lua must not take another delivery's
// token for its own earlier run, nor hand over a delivery another holder
// handed over already; these tests make the tokens collide by trying, with
// the real scripts, until they do.

// collideTries bounds the tries: one in 500 collides, so 20,000 tries miss
// with a chance of e^-40.
const collideTries = 20_000

// confirmNonce runs one Confirm call over items with the nonce given: the
// same nonce twice is one call run twice.
func (s *slot) confirmNonce(nonce string, items ...scripts.HeldItem) scripts.ConfirmReply {
	s.t.Helper()
	keys, args := scripts.ConfirmArgsNonce(nonce, s.heldGroup(items))
	vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseConfirmReply(vals, len(items))
	require.NoError(s.t, err)
	return r
}

// A held message that a re-send took back to store and an ordinary fetch
// then took, with the very token the holder's confirm would have given it
// (same salt, same attempt), is that fetch's delivery: the holder's confirm
// answers gone and leaves it alone, so one listener runs it, and only that
// delivery's ack counts.
func TestConfirmIgnoresAFetchWithTheSameToken(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	require.EqualValues(t, 1, s.send("m", float64(now+60_000), "held"))
	r := s.fetchMode(1, now+120_000, true)
	require.Len(t, r.Msgs, 1)
	held := heldItems(r)["m"]
	require.True(t, scripts.IsHeld(held.Token))
	mine := held.Token - scripts.HeldToken // what a confirm would hand over with

	// A re-send due now takes it back to store; fetches take it until one
	// gets the holder's token (each other one is acked and the id sent
	// again, so every fetch is a first attempt, as the held one was).
	require.EqualValues(t, 3, s.send("m", past(), "resent"))
	var token int64
	for try := 0; ; try++ {
		require.Less(t, try, collideTries, "no collision")
		_, got := s.fetch(1, 30)
		require.Len(t, got, 1)
		token = got[0].token
		if token == mine {
			break
		}
		require.EqualValues(t, 1, s.ack("m", token))
		require.EqualValues(t, 1, s.send("m", past(), "resent"))
	}

	st := s.state()
	c := s.confirmHeld(held)
	assert.Equal(t, []int64{scripts.HeldGone}, c.Codes, "another delivery's: not handed over again")
	assert.Empty(t, c.Tokens)
	assert.Equal(t, st, s.state(), "the fetch's delivery is left as it is")
	// Nor is an ordinary token a held delivery's, even the current one.
	ordinary := held
	ordinary.Token = token
	assert.Equal(t, []int64{scripts.HeldGone}, s.confirmHeld(ordinary).Codes)
	assert.Equal(t, st, s.state())
	assert.EqualValues(t, 1, s.ack("m", token), "the fetch's delivery acks")
}

// Two holders in turn held one id with the same held token (a re-send took
// it back from the first, and the second's lookahead fetch got the same
// salt): whichever confirms first hands it over, and the other finds it
// gone. Before, the second took the first's handed-over token for its own
// earlier run and handed it over too.
func TestConfirmOneOfTwoHoldersWithTheSameToken(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	due := now + 4_000 // beyond the tries (about a second under -race)
	require.EqualValues(t, 1, s.send("m", float64(due), "held"))
	r := s.fetchMode(1, due, true)
	require.Len(t, r.Msgs, 1)
	first := heldItems(r)["m"]
	require.True(t, scripts.IsHeld(first.Token))

	// A re-send at the same due time takes it back to store; lookahead
	// fetches take it until one gets the first holder's token (each other
	// one is given back, no attempt counted).
	require.EqualValues(t, 3, s.send("m", float64(due), "resent"))
	var second scripts.HeldItem
	for try := 0; ; try++ {
		require.Less(t, try, collideTries, "no collision")
		r = s.fetchMode(1, due, true)
		require.Len(t, r.Msgs, 1)
		second = heldItems(r)["m"]
		require.True(t, scripts.IsHeld(second.Token), "the test ran late: the message came due")
		if second.Token == first.Token {
			break
		}
		require.Equal(t, []int64{1}, s.releaseHeld(second))
	}

	s.sleepPast(due)
	c := s.confirmHeld(first)
	require.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	st := s.state()
	c2 := s.confirmHeld(second)
	assert.Equal(t, []int64{scripts.HeldGone}, c2.Codes, "handed over once, not to both holders")
	assert.Equal(t, st, s.state())
	assert.EqualValues(t, 1, s.ack("m", c.Tokens[0]))
}

// A confirm call run twice (go-redis resends a call whose reply was lost)
// answers the same the second time, changing nothing; another call over
// the same held delivery, once it is handed over, finds it gone.
func TestConfirmRerunAnswersTheSame(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	due := now + 200
	require.EqualValues(t, 1, s.send("a", float64(due), "a"))
	require.EqualValues(t, 1, s.send("b", float64(due+100_000), "b"))
	r := s.fetchMode(2, due+100_000, true)
	require.Len(t, r.Msgs, 2)
	held := heldItems(r)
	s.sleepPast(due)

	c := s.confirmNonce("n1", held["a"], held["b"])
	require.Equal(t, []int64{scripts.HeldDeliver, scripts.HeldNotYet}, c.Codes)
	require.Equal(t, []int64{held["a"].Token - scripts.HeldToken}, c.Tokens)
	st := s.state()
	again := s.confirmNonce("n1", held["a"], held["b"])
	assert.Equal(t, c.Codes, again.Codes)
	assert.Equal(t, c.Tokens, again.Tokens)
	assert.Equal(t, st, s.state(), "a rerun changes nothing")

	other := s.confirmNonce("n2", held["a"])
	assert.Equal(t, []int64{scripts.HeldGone}, other.Codes, "another call: handed over already")

	// The record is the call's alone, and it does not stay.
	ttl, err := s.rdb.PTTL(s.ctx, scripts.ConfirmRecordKey(s.heldGroup(nil), "n1")).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
	n, err := s.rdb.Exists(s.ctx, scripts.ConfirmRecordKey(s.heldGroup(nil), "n2")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a call that handed nothing over records nothing")
}

// A call that names the record of an earlier call, one that failed on the
// client's side after Redis ran it, hands over again what that call handed
// over, with its token; a call that does not name it finds it gone. A
// record of a delivery that is not current any more names nothing.
func TestConfirmNamesAFailedCallsRecord(t *testing.T) {
	s := newSlot(t, 3)
	now := s.redisNowMs()
	due := now + 200
	require.EqualValues(t, 1, s.send("a", float64(due), "a"))
	r := s.fetchMode(1, due+1_000, true)
	require.Len(t, r.Msgs, 1)
	held := heldItems(r)["a"]
	s.sleepPast(due)

	c := s.confirmNonce("failed", held)
	require.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	assert.Equal(t, []int64{scripts.HeldGone}, s.confirmNonce("forgot", held).Codes)

	named := func(nonce string) scripts.ConfirmReply {
		g := s.heldGroup([]scripts.HeldItem{held})
		keys, args := scripts.ConfirmArgsNonce(nonce, g, scripts.ConfirmRecordKey(g, "failed"))
		vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
		require.NoError(t, err)
		rep, err := scripts.ParseConfirmReply(vals, 1)
		require.NoError(t, err)
		return rep
	}
	st := s.state()
	again := named("retry")
	assert.Equal(t, c.Codes, again.Codes)
	assert.Equal(t, c.Tokens, again.Tokens)
	assert.Equal(t, st, s.state())

	// Acked, sent again and fetched: another delivery, whose prepare score
	// (a lease of 60 s here, 30 s and the lookahead there) the record does
	// not name, whatever its token.
	require.EqualValues(t, 1, s.ack("a", c.Tokens[0]))
	require.EqualValues(t, 1, s.send("a", past(), "a2"))
	_, got := s.fetch(1, 60)
	require.Len(t, got, 1)
	assert.Equal(t, []int64{scripts.HeldGone}, named("late").Codes)
}

// A record names each delivery by its slot and id: a later call over
// groups of two topics that both hold an id "x", naming the record of a
// failed call that handed both over, hands each over again with its own
// token; one that does not name it finds both gone.
func TestConfirmRecordAcrossGroups(t *testing.T) {
	ft := newSlot(t, 3)
	rm := newSlot(t, 1)
	now := ft.redisNowMs()
	require.EqualValues(t, 1, ft.send("x", float64(now+150), "f"))
	require.EqualValues(t, 1, rm.send("x", 150, "r"))
	fh := heldItems(ft.fetchMode(1, now+1_000, true))["x"]
	rh := heldItems(rm.fetchMode(1, now+1_000, true))["x"]
	require.True(t, scripts.IsHeld(fh.Token))
	require.True(t, scripts.IsHeld(rh.Token))
	ft.sleepPast(max(fh.Score, rh.Score))

	fg := scripts.HeldGroup{Store: ft.k.Store, Prepare: ft.k.Prepare, Msg: ft.k.Msg, Wake: ft.k.Wake, Items: []scripts.HeldItem{fh}}
	rg := scripts.HeldGroup{Store: rm.k.Store, Prepare: rm.k.Prepare, Msg: rm.k.Msg, Wake: rm.k.Wake, Items: []scripts.HeldItem{rh}}
	run := func(nonce string, groups []scripts.HeldGroup, records ...string) scripts.ConfirmReply {
		keys, args := scripts.ConfirmArgsNonce(nonce, groups, records...)
		vals, err := scripts.Confirm.Run(ft.ctx, ft.rdb, keys, args...).Slice()
		require.NoError(t, err)
		r, err := scripts.ParseConfirmReply(vals, 2)
		require.NoError(t, err)
		return r
	}
	first := run("failed", []scripts.HeldGroup{rg, fg})
	require.Equal(t, []int64{1, 1}, first.Codes)
	// The next call, naming the failed one's record, groups them in the
	// other order (its record lies in another group's hash tag).
	swapped := []scripts.HeldGroup{fg, rg}
	c := run("next", swapped, scripts.ConfirmRecordKey([]scripts.HeldGroup{rg, fg}, "failed"))
	assert.Equal(t, []int64{1, 1}, c.Codes)
	assert.Equal(t, []int64{first.Tokens[1], first.Tokens[0]}, c.Tokens)
	assert.Equal(t, []int64{scripts.HeldGone, scripts.HeldGone}, run("unnamed", swapped).Codes)
}
