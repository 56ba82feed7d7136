package scripts_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// flowSlot drives one slot of a topic whose messages carry groups, with
// the scripts the producer and consumer run (gsend, fetch with a grouped
// flow, ack, rollback with the flow keys).
type flowSlot struct {
	*slot
	g    keyspace.GroupKeys
	f    keyspace.FlowKeys
	flow scripts.Flow
}

func newFlowSlot(t *testing.T, typ int) *flowSlot {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	tp := topic.MustNew("t", topic.Type(typ), 1)
	s := &slot{t: t, ctx: t.Context(), rdb: rdb, k: keyspace.KeysFor(prefix, tp, 0), typ: typ}
	return &flowSlot{slot: s, g: keyspace.GroupKeysFor(prefix, tp, 0), f: keyspace.FlowKeysFor(prefix, tp), flow: scripts.Flow{Grouped: true}}
}

// gsend sends messages of group grp with the given scores (due ms, or
// priorities) and ids, in one call.
func (s *flowSlot) gsend(grp string, ids []string, scores []float64) []int64 {
	s.t.Helper()
	g := scripts.GSendGroup{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake, Delayed: s.k.Delayed,
		Queue: s.g.Queue, Turn: s.g.Turn, Type: s.typ}
	opts := scripts.EncodeOptions(scripts.Options{Group: grp})
	for i, id := range ids {
		s.nonce++
		g.Msgs = append(g.Msgs, scripts.GSendMsg{ID: id, Score: strconv.FormatFloat(scores[i], 'f', -1, 64),
			Nonce: strconv.Itoa(s.nonce), Opts: opts, Body: []byte("body " + id)})
	}
	keys, args := scripts.GSendArgs("PUBLISH", []scripts.GSendGroup{g})
	res, err := scripts.GSend.Run(s.ctx, s.rdb, keys, args...).Int64Slice()
	require.NoError(s.t, err)
	return res
}

// gfetch fetches up to n with the slot's flow.
func (s *flowSlot) gfetch(n int) (scripts.FetchReply, []delivered) {
	s.t.Helper()
	f := s.flow
	if f.TopicRateIv > 0 || f.TopicConcurrency > 0 {
		f.TopicFlow, f.Prepares = s.f.Flow, []string{s.k.Prepare}
	}
	r := s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: 30, Window: n + 4, Flow: &f,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n,
			GQ: s.g.Queue, GOcc: s.g.Places, GTurn: s.g.Turn, GRate: s.g.Rate}}})
	return r, deliveries(s.t, r)
}

func (s *flowSlot) tflow() string {
	if s.flow.TopicConcurrency > 0 {
		return s.f.Flow
	}
	return s.k.Store
}

// gack acks with the flow keys, as an engine with flow control does.
func (s *flowSlot) gack(d delivered) int64 {
	s.t.Helper()
	delayed := s.k.Delayed
	if s.typ != 2 {
		delayed = s.k.Store
	}
	res, err := scripts.Ack.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, delayed, s.k.Dead,
		s.g.Queue, s.g.Places, s.g.Turn, s.tflow()}, "PUBLISH", -1, d.id, d.token).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

// gackAll acks ds in one call, as the engine's group-committed acks do.
func (s *flowSlot) gackAll(ds ...delivered) []int64 {
	s.t.Helper()
	delayed := s.k.Delayed
	if s.typ != 2 {
		delayed = s.k.Store
	}
	args := []any{"PUBLISH", -len(ds)}
	for _, d := range ds {
		args = append(args, d.id, d.token)
	}
	res, err := scripts.Ack.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, delayed, s.k.Dead,
		s.g.Queue, s.g.Places, s.g.Turn, s.tflow()}, args...).Int64Slice()
	require.NoError(s.t, err)
	return res
}

// groll rolls d back (how: ” the backoff of backoffMs, 'd' dead now).
func (s *flowSlot) groll(d delivered, backoffMs int64, how string) int64 {
	s.t.Helper()
	keys := append(s.allKeys(), s.g.Queue, s.g.Places, s.g.Turn, s.tflow())
	args := append(s.rollbackArgs(16, backoffMs, 0), d.id, d.token, "failed", how)
	res, err := scripts.Rollback.Run(s.ctx, s.rdb, keys, args...).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

func ids(ds []delivered) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.id
	}
	return out
}

func seq(prefix string, n int) ([]string, []float64) {
	ids := make([]string, n)
	scores := make([]float64, n)
	base := past()
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%03d", prefix, i)
		scores[i] = base + float64(i)
	}
	return ids, scores
}

// A grouped send waits in its group's queue, not in store; the envelope
// carries the group; a grouped fetch delivers it with its group.
func TestGroupedSendWaitsInItsGroup(t *testing.T) {
	s := newFlowSlot(t, 3)
	require.Equal(t, []int64{1}, s.gsend("tenant-1", []string{"a"}, []float64{past()}))
	assert.Equal(t, where{msg: true}, s.where("a"))
	n, err := s.rdb.ZCard(s.ctx, s.g.Queue).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, "tenant-1", s.envelope(s.k.Msg, "a").Options.Group)

	// A repeat with the same id replaces it (fixed-time): still one.
	require.Equal(t, []int64{3}, s.gsend("tenant-1", []string{"a"}, []float64{past() - 5}))
	n, _ = s.rdb.ZCard(s.ctx, s.g.Queue).Result()
	assert.EqualValues(t, 1, n)

	_, got := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
	assert.Equal(t, "tenant-1", got[0].env.Options.Group)
	assert.Equal(t, where{prepare: true, msg: true}, s.where("a"))
	r, got := s.gfetch(10)
	assert.Empty(t, got)
	assert.EqualValues(t, -1, r.Heads[0])
}

// A group with a long backlog delays another group's message by at most
// one turn.
func TestGroupsAreServedInTurn(t *testing.T) {
	s := newFlowSlot(t, 3)
	bigIDs, bigScores := seq("big", 200)
	s.gsend("big", bigIDs, bigScores)
	for i := range 10 {
		s.gsend("small"+strconv.Itoa(i), []string{fmt.Sprintf("s%d", i)}, []float64{past() + 500})
	}
	var order []string
	for len(order) < 210 {
		_, got := s.gfetch(4)
		require.NotEmpty(t, got)
		for _, d := range got {
			order = append(order, d.id)
			require.EqualValues(t, 1, s.gack(d))
		}
	}
	lastSmall, bigSeen := -1, 0
	for i, id := range order {
		if id[0] == 's' {
			lastSmall = i
		}
	}
	for _, id := range order[:lastSmall+1] {
		if id[0] == 'b' {
			bigSeen++
		}
	}
	assert.LessOrEqual(t, bigSeen, 2, "the big group gave at most one per turn before the small groups were done: %v", order[:lastSmall+1])
	// The big group's messages stay in order.
	var big []string
	for _, id := range order {
		if id[0] == 'b' {
			big = append(big, id)
		}
	}
	assert.Equal(t, bigIDs, big)
}

// With one place per group, a group's next message waits for the end of
// the delivery before it, in order; an ack frees the place and puts the
// group back in the rotation.
func TestGroupPlacesHoldTheNextMessage(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 1
	aIDs, aScores := seq("a", 3)
	s.gsend("A", aIDs, aScores)
	s.gsend("B", []string{"b0"}, []float64{past()})

	r, got := s.gfetch(10)
	assert.ElementsMatch(t, []string{"a000", "b0"}, ids(got))
	r, again := s.gfetch(10)
	assert.Empty(t, again, "group A is at its place limit")
	assert.EqualValues(t, -2, r.Heads[0])

	var a delivered
	for _, d := range got {
		if d.id == "a000" {
			a = d
		}
	}
	require.EqualValues(t, 1, s.gack(a))
	_, next := s.gfetch(10)
	require.Equal(t, []string{"a001"}, ids(next))

	// A retry keeps its place: a002 waits while a001 waits for its retry.
	require.EqualValues(t, 4, s.groll(next[0], 50, ""))
	_, none := s.gfetch(10)
	assert.Empty(t, none)
	require.Eventually(t, func() bool {
		_, got := s.gfetch(10)
		if len(got) == 0 {
			return false
		}
		require.Equal(t, []string{"a001"}, ids(got), "the retry, before the group's next")
		require.Equal(t, 2, got[0].env.Failures+1)
		next = got
		return true
	}, 5*time.Second, 10*time.Millisecond)
	// Dead frees the place.
	require.EqualValues(t, 3, s.groll(next[0], 0, "d"))
	_, last := s.gfetch(10)
	require.Equal(t, []string{"a002"}, ids(last))
}

// A group rate lets a burst go, then holds the group and says until when;
// other groups go on.
func TestGroupRateHoldsOneGroup(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupRateIv, s.flow.GroupTol = 1e6, 1e6 // 1/s, a burst of 2
	aIDs, aScores := seq("a", 5)
	s.gsend("A", aIDs, aScores)
	bIDs, bScores := seq("b", 5)
	s.gsend("B", bIDs, bScores)
	r, got := s.gfetch(100)
	assert.Equal(t, 4, len(got), "two of each group: %v", ids(got))
	r, got = s.gfetch(100)
	assert.Empty(t, got)
	// Time-based: the head says when the groups may go again.
	assert.Greater(t, r.Heads[0], float64(time.Now().UnixMilli()))
	assert.Less(t, r.Heads[0], float64(time.Now().Add(1100*time.Millisecond).UnixMilli()))
}

// The topic's rate caps what one fetch takes and says when the next may.
func TestTopicRateCapsFetches(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.TopicRateIv, s.flow.TopicTol = 100e3, 400e3 // 10/s, burst 5
	xIDs, xScores := seq("x", 20)
	s.gsend("X", xIDs, xScores)
	r, got := s.gfetch(100)
	assert.Len(t, got, 5)
	r, got = s.gfetch(100)
	assert.Empty(t, got)
	assert.Greater(t, r.TopicWait, time.Now().UnixMilli())
	assert.LessOrEqual(t, r.TopicWait, time.Now().Add(200*time.Millisecond).UnixMilli())
}

// The topic's concurrency counts what is in prepare; at the limit the fetch
// says so and the next ack clears the mark (and wakes the slot).
func TestTopicConcurrencyCountsPrepare(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.TopicConcurrency = 2
	xIDs, xScores := seq("x", 5)
	s.gsend("X", xIDs, xScores)
	_, got := s.gfetch(100)
	require.Len(t, got, 2)
	r, none := s.gfetch(100)
	assert.Empty(t, none)
	assert.EqualValues(t, -1, r.TopicWait)
	blocked, err := s.rdb.HExists(s.ctx, s.f.Flow, "blocked").Result()
	require.NoError(t, err)
	assert.True(t, blocked)
	require.EqualValues(t, 1, s.gack(got[0]))
	blocked, _ = s.rdb.HExists(s.ctx, s.f.Flow, "blocked").Result()
	assert.False(t, blocked)
	_, more := s.gfetch(100)
	assert.Len(t, more, 1)
}

// A grouped message back in store (a dead one requeued, say) waits in its
// group again when a fetch meets it; gremove removes one waiting in its
// group.
func TestGroupedMessageInStoreGoesBackToItsGroup(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 1
	s.gsend("A", []string{"a0", "a1"}, []float64{past(), past() + 1})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a0"}, ids(got))
	require.EqualValues(t, 3, s.groll(got[0], 0, "d"))
	// Requeue the dead one: it lands in store, due now.
	res, err := scripts.Requeue.Run(s.ctx, s.rdb, s.allKeys(), "PUBLISH", "99", 0, 0, "a0").Int64Slice()
	require.NoError(t, err)
	require.Equal(t, []int64{1}, res)
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a1"}, ids(got), "a0 went to the back of its group")
	assert.Equal(t, where{msg: true}, s.where("a0"))
	n, err := scripts.GRemove.Run(s.ctx, s.rdb, []string{s.k.Msg, s.g.Queue}, "a0").Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, where{}, s.where("a0"))
	n, _ = scripts.GRemove.Run(s.ctx, s.rdb, []string{s.k.Msg, s.g.Queue}, "a0").Int64()
	assert.EqualValues(t, 0, n)
}

// permit.lua: places are shared out up to the limit as reservations,
// bound to the deliveries that took them, given back by name, and lost
// when their lease runs out.
func TestPermitsShareTheTopicConcurrency(t *testing.T) {
	s := newFlowSlot(t, 3)
	seq := 0
	call := func(pc scripts.PermitCall) (scripts.PermitReply, string) {
		t.Helper()
		seq++
		pc.Keys, pc.Concurrency = s.f, 5
		if pc.ID == "" {
			pc.ID = fmt.Sprintf("c%d", seq)
		}
		if pc.ReserveMs == 0 {
			pc.ReserveMs = 60000
		}
		keys, args := pc.Args()
		vals, err := scripts.Permit.Run(s.ctx, s.rdb, keys, args...).Slice()
		require.NoError(t, err)
		r, err := scripts.ParsePermitReply(vals)
		require.NoError(t, err)
		return r, pc.ID
	}
	a, aid := call(scripts.PermitCall{Want: 3})
	assert.Equal(t, 3, a.Granted)
	b, bid := call(scripts.PermitCall{Want: 3, ReserveMs: 100})
	assert.Equal(t, 2, b.Granted)
	r, _ := call(scripts.PermitCall{Want: 1})
	assert.Equal(t, 0, r.Granted)
	assert.EqualValues(t, -1, r.Wait)
	assert.Positive(t, r.Expiry, "b's reservations lapse first")
	lapse := r.Expiry
	// a's fetch leased two: they take two reservations, the third goes back.
	r, _ = call(scripts.PermitCall{Release: []string{scripts.Reservation(aid, 3)}, Bind: []scripts.PlaceBind{
		{Reservation: scripts.Reservation(aid, 1), Member: scripts.PlaceMember(0, "m1"), Token: 7, LeaseMs: 60000},
		{Reservation: scripts.Reservation(aid, 2), Member: scripts.PlaceMember(1, "m2"), Token: 8, LeaseMs: 60000}}})
	assert.True(t, r.Woke)
	r, _ = call(scripts.PermitCall{Want: 2})
	assert.Equal(t, 1, r.Granted)
	// The end of another delivery of m1 (another token) frees nothing; m1's
	// own does, once.
	end := func(tok int64) scripts.PermitCall {
		return scripts.PermitCall{End: []scripts.PlaceEnd{{Member: scripts.PlaceMember(0, "m1"), Token: tok}}}
	}
	call(end(6))
	r, _ = call(scripts.PermitCall{Want: 1})
	assert.Equal(t, 0, r.Granted)
	call(end(7))
	call(end(7))
	r, _ = call(scripts.PermitCall{Want: 5})
	assert.Equal(t, 1, r.Granted, "one place came back, once")
	// b's reservations lapse: their two places come free.
	_ = bid
	s.sleepPast(lapse)
	r, _ = call(scripts.PermitCall{Want: 5})
	assert.Equal(t, 2, r.Granted)
	n, err := s.rdb.ZCard(s.ctx, s.f.Places).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
}

// A permit call go-redis sends again after a lost reply (same call id)
// gets the first run's reply and changes nothing twice: its places are
// not granted again, its rate starts not taken again, its refund not
// given again.
func TestPermitCallSentTwiceCountsOnce(t *testing.T) {
	s := newFlowSlot(t, 3)
	iv, tol := 100000.0, 500000.0 // 10/s, a burst of 5
	run := func(id string, want, refund int) scripts.PermitReply {
		t.Helper()
		keys, args := scripts.PermitCall{Keys: s.f, ID: id, Want: want, Refund: refund, ReserveMs: 60000, RateIv: iv, RateTol: tol, Concurrency: 3}.Args()
		vals, err := scripts.Permit.Run(s.ctx, s.rdb, keys, args...).Slice()
		require.NoError(t, err)
		r, err := scripts.ParsePermitReply(vals)
		require.NoError(t, err)
		return r
	}
	first := run("x1", 2, 0)
	assert.Equal(t, 2, first.Granted)
	again := run("x1", 2, 0)
	assert.Equal(t, first, again, "a resend gets the first reply")
	n, err := s.rdb.ZCard(s.ctx, s.f.Places).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "two places reserved")
	tat1, err := s.rdb.HGet(s.ctx, s.f.Flow, "tat").Result()
	require.NoError(t, err)
	// A refund sent twice gives one start back.
	run("x2", 0, 1)
	run("x2", 0, 1)
	tat2, err := s.rdb.HGet(s.ctx, s.f.Flow, "tat").Result()
	require.NoError(t, err)
	t1, _ := strconv.ParseFloat(tat1, 64)
	t2, _ := strconv.ParseFloat(tat2, 64)
	assert.InDelta(t, t1-iv, t2, 1, "one interval refunded")
}

// A place that no end of a delivery frees (its message removed while in
// flight by a caller that names no group keys) is found when the group has
// been blocked for a while, and a blocked group goes on at once when the
// topic no longer limits places.
func TestBlockedGroupsAreLookedAtAgain(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 1
	s.gsend("A", []string{"a0", "a1", "a2"}, []float64{past(), past() + 1, past() + 2})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a0"}, ids(got))
	r, none := s.gfetch(10)
	require.Empty(t, none)
	require.EqualValues(t, -2, r.Heads[0])
	require.EqualValues(t, 4, s.remove("a0"), "removed in flight: no ack will free its place")
	_, none = s.gfetch(10)
	require.Empty(t, none, "blocked less than the recheck time")
	// As if blocked 6 s ago.
	const gblocked = 4503599627370496
	require.NoError(t, s.rdb.ZAdd(s.ctx, s.g.Turn, redis.Z{Score: float64(gblocked + time.Now().Add(-6*time.Second).UnixMilli()), Member: "A"}).Err())
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a1"}, ids(got), "the stale place was dropped")

	// Without places, the blocked group goes on.
	_, none = s.gfetch(10)
	require.Empty(t, none)
	s.flow.GroupPlaces = 0
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a2"}, ids(got))
}

// A grouped fetch's delivery tokens are handed-over ones (below
// HELD_TOKEN, lib.lua): a token in the held range would make ack by id,
// rollback and remove take the delivery for a message held for its
// instant. Each fetch's salt starts from Redis's µs, so many fetches of
// one message each cover the salts.
func TestGroupedDeliveryTokensAreNotHeld(t *testing.T) {
	s := newFlowSlot(t, 3)
	const n = 300
	idList, scores := seq("m", n)
	s.gsend("A", idList, scores)
	for range n {
		_, got := s.gfetch(1)
		require.Len(t, got, 1)
		require.Less(t, got[0].token, int64(500000), "token %d of %s", got[0].token, got[0].id)
		require.Greater(t, got[0].token%1000, int64(0), "an attempt")
	}
}

// One ack call that ends several deliveries of groups at their place limit
// frees every place and puts each group back in the rotation once.
func TestOneAckCallFreesThePlacesOfSeveralGroups(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 2
	aIDs, aScores := seq("a", 4)
	bIDs, bScores := seq("b", 3)
	s.gsend("A", aIDs, aScores)
	s.gsend("B", bIDs, bScores)

	_, got := s.gfetch(10)
	require.ElementsMatch(t, []string{"a000", "a001", "b000", "b001"}, ids(got))
	_, none := s.gfetch(10)
	require.Empty(t, none, "both groups at their place limit")

	assert.Equal(t, []int64{1, 1, 1, 1}, s.gackAll(got...))
	places, err := s.rdb.ZCard(s.ctx, s.g.Places).Result()
	require.NoError(t, err)
	assert.Zero(t, places, "every place freed")
	_, next := s.gfetch(10)
	assert.ElementsMatch(t, []string{"a002", "a003", "b002"}, ids(next), "both groups served again")
}
