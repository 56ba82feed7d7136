package scripts_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// A fetch and a confirm log the deliveries they hand over ("delivered")
// and the messages a fetch drops because their expiry passed ("expired")
// in the slot's event log, in the call that does it; a held message
// (lookahead) is logged when confirm.lua hands it over, never when it is
// given back; a call run twice logs nothing twice; without a log the
// calls name no log and write none.

// evlog returns the slot's log as "type id attempt" lines, in order.
func (s *lifeSlot) evlog() []string {
	s.t.Helper()
	var out []string
	for _, e := range s.events() {
		out = append(out, fmt.Sprintf("%s %s %s", e["t"], e["id"], e["a"]))
	}
	return out
}

// fetchEv fetches up to n from the slot, logging events when ev > 0.
func (s *lifeSlot) fetchEv(n int, ev int64, lookahead bool, bound string) scripts.FetchReply {
	s.t.Helper()
	g := scripts.FetchGroup{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n}
	if ev > 0 {
		g.Events = s.lk.Events
	}
	return s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: 30, Window: n + 8, Bound: bound, Lookahead: lookahead,
		Groups: []scripts.FetchGroup{g}, Events: ev})
}

func (s *lifeSlot) heldGroupEv(items []scripts.HeldItem) []scripts.HeldGroup {
	return []scripts.HeldGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake, Items: items,
		Events: s.lk.Events, EventsMax: 100}}
}

// confirmNonce runs one confirm call with the given nonce (the same nonce
// twice is a call go-redis sent again).
func (s *lifeSlot) confirmNonce(nonce string, items ...scripts.HeldItem) scripts.ConfirmReply {
	s.t.Helper()
	keys, args := scripts.ConfirmArgsNonce(nonce, s.heldGroupEv(items))
	vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseConfirmReply(vals, len(items))
	require.NoError(s.t, err)
	return r
}

// A fetch logs each message it hands over with its attempt, and each it
// drops as expired with the attempts it had; a fetch that finds nothing
// new (a resent one) logs nothing; a retry's delivery is attempt 2.
func TestFetchLogsDeliveredAndExpired(t *testing.T) {
	s := newLifeSlot(t, 3)
	now := s.redisNowMs()
	s.sendOpts("x", float64(now-20), scripts.Options{ExpiresAtMs: now - 10}, "vx")
	s.send("a", float64(now-10), "va")
	s.send("later", float64(now+60_000), "vl")
	r := s.fetchEv(10, 100, false, "")
	require.Len(t, r.Msgs, 1)
	assert.Equal(t, 1, r.Expired)
	assert.Equal(t, []string{"expired x 0", "delivered a 1"}, s.evlog())

	r = s.fetchEv(10, 100, false, "")
	require.Empty(t, r.Msgs, "a is in flight")
	assert.Len(t, s.evlog(), 2, "a fetch that moves nothing logs nothing")

	res, err := s.rollbackL(3, "a", s.prepareToken("a"), "boom", "", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, res)
	r = s.fetchEv(10, 100, false, "")
	require.Len(t, r.Msgs, 1)
	assert.Equal(t, []string{"expired x 0", "delivered a 1", "retried a 1", "delivered a 2"}, s.evlog())
}

// A fenced fetch (ZooKeeper mode: one group and the epoch key) names its
// log after the group's keys, before the epoch key.
func TestFencedFetchLogsDelivered(t *testing.T) {
	s := newLifeSlot(t, 3)
	_, err := s.takeover(7)
	require.NoError(t, err)
	s.send("a", past(), "va")
	keys, args := scripts.FetchCall{TimeBased: true, N: 5, LeaseSec: 30, Window: 9,
		Groups:   []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: 5, Events: s.lk.Events}},
		EpochKey: s.epochKey, Epoch: 7, Events: 100}.Args()
	vals, err := scripts.Fetch.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	require.Len(t, r.Msgs, 1)
	assert.Equal(t, []string{"delivered a 1"}, s.evlog())
}

// A lookahead fetch logs what is due already; what it holds is logged by
// the confirm that hands it over at its instant, once even when that call
// runs twice, and one given back (release.lua) is never logged.
func TestHeldLoggedWhenHandedOver(t *testing.T) {
	s := newLifeSlot(t, 3)
	now := s.redisNowMs()
	s.send("due", float64(now-5), "vd")
	s.send("h", float64(now+300), "vh")
	s.send("back", float64(now+400), "vb")
	r := s.fetchEv(10, 100, true, ms(now+1_000))
	require.Len(t, r.Msgs, 3)
	held := heldItems(r)
	assert.Equal(t, []string{"delivered due 1"}, s.evlog(), "held ones are not delivered yet")

	c := s.confirmNonce("n1", held["h"])
	require.Equal(t, []int64{scripts.HeldNotYet}, c.Codes)
	assert.Len(t, s.evlog(), 1, "not due: nothing handed over")

	s.sleepPast(now + 300)
	c = s.confirmNonce("n2", held["h"])
	require.Equal(t, []int64{scripts.HeldDeliver}, c.Codes)
	again := s.confirmNonce("n2", held["h"])
	require.Equal(t, c.Codes, again.Codes, "a resent confirm answers the same")
	require.Equal(t, c.Tokens, again.Tokens)
	assert.Equal(t, []string{"delivered due 1", "delivered h 1"}, s.evlog(), "logged once, by the run that handed it over")

	require.Equal(t, []int64{1}, s.releaseHeld(held["back"]))
	assert.Len(t, s.evlog(), 2, "a held message given back was never delivered")
}

// Confirm groups of which only some log events: each logging group names
// its log after the records, in group order.
func TestConfirmLogsPerGroup(t *testing.T) {
	s := newLifeSlot(t, 3)
	o := newLifeSlotTopic(t, s, "u", 3)
	now := s.redisNowMs()
	s.send("a", float64(now+200), "va")
	o.send("b", float64(now+200), "vb")
	ra := s.fetchEv(5, 100, true, ms(now+1_000))
	rb := o.fetchEv(5, 100, true, ms(now+1_000))
	s.sleepPast(now + 200)
	groups := []scripts.HeldGroup{
		{Prepare: o.k.Prepare, Items: []scripts.HeldItem{heldItems(rb)["b"]}}, // no log
		s.heldGroupEv([]scripts.HeldItem{heldItems(ra)["a"]})[0],
	}
	// A failed earlier call's record among the keys: the logs come after.
	keys, args := scripts.ConfirmArgsNonce("m1", groups, scripts.ConfirmRecordKey(groups, "m0"))
	vals, err := scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(t, err)
	c, err := scripts.ParseConfirmReply(vals, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1}, c.Codes)
	assert.Equal(t, []string{"delivered a 1"}, s.evlog())
	assert.Empty(t, o.evlog())
}

// newLifeSlotTopic is a life slot of another topic (name, of type typ) on
// s's server and prefix, for calls that carry several topics.
func newLifeSlotTopic(t *testing.T, s *lifeSlot, name string, typ int) *lifeSlot {
	prefix := s.k.Store[:len(s.k.Store)-len(":{t:0}:store")]
	tp := topic.MustNew(name, topic.Type(typ), 1)
	sl := &slot{t: t, ctx: s.ctx, rdb: s.rdb, k: keyspace.KeysFor(prefix, tp, 0), typ: typ, nonce: 1000}
	return &lifeSlot{fenced: &fenced{slot: sl}, lk: keyspace.LifeKeysFor(prefix, name, 0)}
}

// A call of several sections: one with a log (time-based), one without
// (priority with delayed sets, whose argument count depends on its mode):
// each is taken as if alone, and only the first logs.
func TestMultiFetchLogsPerSection(t *testing.T) {
	s := newLifeSlot(t, 3)
	p := newLifeSlotTopic(t, s, "p", 2)
	s.send("a", past(), "va")
	p.send("b", 5, "vb")
	calls := []scripts.FetchCall{
		{TimeBased: true, N: 5, LeaseSec: 30, Window: 9, Events: 100,
			Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: 5, Events: s.lk.Events}}},
		{N: 5, LeaseSec: 30, Window: 9,
			Groups: []scripts.FetchGroup{{Store: p.k.Store, Prepare: p.k.Prepare, Msg: p.k.Msg, Delayed: p.k.Delayed, Max: 5, CheckDelayed: true}}},
	}
	keys, args := scripts.MultiFetchArgs(calls)
	vals, err := scripts.Fetch.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(t, err)
	rs, errs, err := scripts.ParseMultiFetchReply(vals, 2)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Len(t, rs[0].Msgs, 1)
	require.Len(t, rs[1].Msgs, 1)
	assert.Equal(t, []string{"delivered a 1"}, s.evlog())
	assert.Empty(t, p.evlog())
}

// A grouped section (flow control) logs what it hands over and what it
// drops as expired, from a group's queue and from store alike.
func TestGroupedFetchLogsDeliveredAndExpired(t *testing.T) {
	s := newFlowSlot(t, 3)
	prefix := s.k.Store[:len(s.k.Store)-len(":{t:0}:store")]
	lk := keyspace.LifeKeysFor(prefix, "t", 0)
	now := time.Now().UnixMilli()
	g := scripts.GSendGroup{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake, Delayed: s.k.Delayed,
		Queue: s.g.Queue, Turn: s.g.Turn, Type: s.typ}
	for i, m := range []struct {
		id      string
		expires int64
	}{{"g1", 0}, {"g2", now - 1}} {
		g.Msgs = append(g.Msgs, scripts.GSendMsg{ID: m.id, Score: strconv.FormatInt(now-100+int64(i), 10), Nonce: strconv.Itoa(900 + i),
			Opts: scripts.EncodeOptions(scripts.Options{Group: "A", ExpiresAtMs: m.expires}), Body: []byte(m.id)})
	}
	keys, args := scripts.GSendArgs("PUBLISH", []scripts.GSendGroup{g})
	require.NoError(t, scripts.GSend.Run(s.ctx, s.rdb, keys, args...).Err())
	s.send("plain", float64(now-50), "vp")
	s.sendOpts("old", float64(now-40), scripts.Options{ExpiresAtMs: now - 1}, "vo")
	f := s.flow
	r := s.fetchGroups(scripts.FetchCall{N: 10, LeaseSec: 30, Window: 14, Flow: &f, Events: 100,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: 10,
			GQ: s.g.Queue, GOcc: s.g.Places, GTurn: s.g.Turn, GRate: s.g.Rate, Events: lk.Events}}})
	assert.Equal(t, 2, r.Expired)
	xs, err := s.rdb.XRange(s.ctx, lk.Events, "-", "+").Result()
	require.NoError(t, err)
	got := map[string]int{}
	for _, x := range xs {
		got[fmt.Sprintf("%s %s %s", x.Values["t"], x.Values["id"], x.Values["a"])]++
	}
	want := map[string]int{"expired g2 0": 1, "expired old 0": 1}
	for _, m := range r.Msgs {
		want["delivered "+m.ID+" 1"] = 1
	}
	assert.Len(t, r.Msgs, 2)
	assert.Equal(t, want, got)
}

// Without a log a fetch and a confirm are what they were: no key and no
// argument more, and nothing written to the log.
func TestNoLogNoEventKey(t *testing.T) {
	s := newLifeSlot(t, 3)
	call := scripts.FetchCall{TimeBased: true, N: 5, LeaseSec: 30, Window: 9,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: 5, Events: s.lk.Events}}}
	keys, args := call.Args()
	assert.Len(t, keys, 4, "the log is named only when the call logs")
	assert.Equal(t, "1", args[0])
	now := s.redisNowMs()
	s.send("a", float64(now-5), "va")
	s.send("h", float64(now+200), "vh")
	s.sendOpts("x", float64(now-20), scripts.Options{ExpiresAtMs: now - 10}, "vx")
	r := s.fetchEv(5, 0, true, ms(now+1_000))
	require.Len(t, r.Msgs, 2)
	assert.Equal(t, 1, r.Expired)
	s.sleepPast(now + 200)
	groups := []scripts.HeldGroup{{Prepare: s.k.Prepare, Items: []scripts.HeldItem{heldItems(r)["h"]}, Events: s.lk.Events}}
	keys, args = scripts.ConfirmArgsNonce("z", groups)
	assert.Len(t, keys, 2, "prepare and record only")
	assert.Equal(t, 1, args[0])
	require.NoError(t, scripts.Confirm.Run(s.ctx, s.rdb, keys, args...).Err())
	n, err := s.rdb.Exists(s.ctx, s.lk.Events).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}
