package scripts_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// Group places (WithGroupConcurrency): a place is held by a delivery in
// flight or a retry waiting for its backoff, and whatever ends that state
// frees it; validation drops a place whose id is in neither state, even
// when a message of the id (a re-send) waits in its group.

// gsendOpts sends one message of group grp due now with options o (its
// group set to grp).
func (s *flowSlot) gsendOpts(grp, id string, o scripts.Options) int64 {
	s.t.Helper()
	o.Group = grp
	s.nonce++
	g := scripts.GSendGroup{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Wake: s.k.Wake, Delayed: s.k.Delayed,
		Queue: s.g.Queue, Turn: s.g.Turn, Type: s.typ,
		Msgs: []scripts.GSendMsg{{ID: id, Score: strconv.FormatFloat(past(), 'f', -1, 64), Nonce: strconv.Itoa(s.nonce),
			Opts: scripts.EncodeOptions(o), Body: []byte("body " + id)}}}
	keys, args := scripts.GSendArgs("PUBLISH", []scripts.GSendGroup{g})
	res, err := scripts.GSend.Run(s.ctx, s.rdb, keys, args...).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

// gremove removes id as Producer.Remove does: with the slot's group keys.
func (s *flowSlot) gremove(id string) int64 {
	s.t.Helper()
	n, err := scripts.Remove.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Delayed, s.g.Queue, s.g.Places, s.g.Turn, s.k.Wake},
		id, "PUBLISH").Int64()
	require.NoError(s.t, err)
	return n
}

// gsweep sweeps with the flow keys, as an engine with group places does.
func (s *flowSlot) gsweep() int64 {
	s.t.Helper()
	keys := append(s.allKeys(), s.g.Queue, s.g.Places, s.g.Turn, s.tflow())
	vals, err := scripts.Sweep.Run(s.ctx, s.rdb, keys, "PUBLISH", 16, 0, 0, 1000, 1, 0).Slice()
	require.NoError(s.t, err)
	return vals[0].(int64)
}

func (s *flowSlot) places() []string {
	s.t.Helper()
	m, err := s.rdb.ZRange(s.ctx, s.g.Places, 0, -1).Result()
	require.NoError(s.t, err)
	return m
}

// A delivery removed while in flight frees its group's place in the
// removing call. A re-send of its id (same id, as a same body makes) waits
// at the group's head behind the removed delivery's tombstone, the
// group's next message behind it; once the tombstone's lease ran out and
// the sweeper cleared it, the re-send goes at once (the sweep wakes its
// group). The removed delivery's late ack frees nothing of the new one.
// Removed by a caller that names no group keys, the place is left, and
// validation drops it: a tombstone holds no place.
func TestRemovedDeliveryFreesItsGroupPlace(t *testing.T) {
	for _, withKeys := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupKeys=%v", withKeys), func(t *testing.T) {
			s := newFlowSlot(t, 3)
			s.flow.GroupPlaces = 1
			s.gsend("G", []string{"a"}, []float64{past()})
			_, got := s.gfetch(10)
			require.Equal(t, []string{"a"}, ids(got))
			first := got[0]

			if withKeys {
				require.EqualValues(t, 4, s.gremove("a"), "removed in flight")
				assert.Empty(t, s.places(), "the removal freed the place")
			} else {
				require.EqualValues(t, 4, s.remove("a"), "removed in flight")
			}

			s.gsend("G", []string{"a"}, []float64{past()})
			s.gsend("G", []string{"b"}, []float64{past() + 500})
			_, none := s.gfetch(10)
			require.Empty(t, none, "the re-send waits behind the tombstone, b behind it")

			// As if the removed delivery's lease ran out: the sweeper clears it.
			s.expire("a")
			require.EqualValues(t, 0, s.gsweep(), "a tombstone is no rollback")
			_, got = s.gfetch(10)
			require.Equal(t, []string{"a"}, ids(got), "the re-send, at once")
			second := got[0]
			require.NotEqual(t, first.token, second.token)

			require.EqualValues(t, 0, s.gack(first), "the removed delivery's ack is refused")
			assert.Equal(t, []string{"G\x00a"}, s.places(), "and frees nothing of the new delivery")
			_, none = s.gfetch(10)
			require.Empty(t, none, "b waits for the new delivery")
			require.EqualValues(t, 1, s.gack(second))
			_, got = s.gfetch(10)
			require.Equal(t, []string{"b"}, ids(got))
		})
	}
}

// A retry waiting for its backoff holds its group's place; removed while
// it waits (in store, or a priority one in the delayed set), it frees the
// place, and a re-send of its id and the group's next message go.
func TestRemovedRetryFreesItsGroupPlace(t *testing.T) {
	for _, typ := range []int{3, 2} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newFlowSlot(t, typ)
			s.flow.GroupPlaces = 1
			s.gsend("G", []string{"a"}, []float64{past()})
			_, got := s.gfetch(10)
			require.Equal(t, []string{"a"}, ids(got))
			require.EqualValues(t, 4, s.groll(got[0], 60000, ""), "a retry in a minute")
			assert.Equal(t, []string{"G\x00a"}, s.places(), "the retry keeps its place")

			want := int64(1) // waiting in store
			if typ == 2 {
				want = 2 // waiting in the delayed set
			}
			require.Equal(t, want, s.gremove("a"))
			assert.Empty(t, s.places())

			// a before b: due first, or (priority) a higher priority.
			sa, sb := past(), past()+500
			if typ == 2 {
				sa, sb = 10, 5
			}
			s.gsend("G", []string{"a"}, []float64{sa})
			s.gsend("G", []string{"b"}, []float64{sb})
			_, got = s.gfetch(10)
			require.Equal(t, []string{"a"}, ids(got), "the re-send goes")
			require.EqualValues(t, 1, s.gack(got[0]))
			_, got = s.gfetch(10)
			require.Equal(t, []string{"b"}, ids(got))
		})
	}
}

// A retry that expires while it waits for its backoff is dropped by the
// fetch that meets it, and that fetch frees its place: a re-send of its
// id goes.
func TestExpiredRetryFreesItsGroupPlace(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 1
	// The expiry and the backoff are durations under test.
	s.gsendOpts("G", "a", scripts.Options{ExpiresAtMs: time.Now().Add(300 * time.Millisecond).UnixMilli()})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
	require.EqualValues(t, 4, s.groll(got[0], 600, ""), "a retry after its expiry")
	require.Eventually(t, func() bool {
		r, got := s.gfetch(10)
		require.Empty(t, got, "an expired retry is never delivered")
		return r.Expired == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.Empty(t, s.places(), "the fetch that dropped it freed its place")

	s.gsend("G", []string{"a"}, []float64{past()})
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
}

// Ends of deliveries that name no flow keys (the topic's group places
// were set to 0 meanwhile, then back to 1) leave places behind; validation
// drops a place whose id is neither in flight nor waiting for a retry,
// even when a re-send of the id waits in its group.
func TestGroupPlacesOffAndOnAgain(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 1
	s.gsend("G", []string{"a", "c"}, []float64{past(), past() + 1})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))

	// Limits 0: the ack names no flow keys.
	s.flow.GroupPlaces = 0
	require.EqualValues(t, 1, s.ack(got[0].id, got[0].token))
	_, got = s.gfetch(10)
	require.Equal(t, []string{"c"}, ids(got))
	// A retry to dead, ended without flow keys too.
	require.EqualValues(t, 3, s.rollback(0, got[0].id, got[0].token, "failed"))

	s.gsend("G", []string{"a", "c"}, []float64{past(), past() + 1})
	s.flow.GroupPlaces = 1
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got), "the stale places were dropped")
	assert.Equal(t, []string{"G\x00a"}, s.places())
}

// A delivery's late ack, after the id was removed, its tombstone swept and
// the id sent again into its group, is refused (0) as when a re-send
// waits in store, not reported gone (2): the ack was not done, and a
// message of the id waits.
func TestLateAckWhileTheIdWaitsInItsGroup(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.gsend("G", []string{"a"}, []float64{past()})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
	require.EqualValues(t, 4, s.remove("a"))
	s.expire("a")
	s.gsweep()
	s.gsend("G", []string{"a"}, []float64{past()})
	assert.EqualValues(t, 0, s.ack(got[0].id, got[0].token), "without flow keys")
	assert.EqualValues(t, 0, s.gack(got[0]), "with them")
	_, again := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(again), "the re-send is delivered")
	require.EqualValues(t, 1, s.gack(again[0]))
	assert.EqualValues(t, 2, s.gack(again[0]), "a second run of a done ack: gone")
}

// A priority retry waits for its backoff in the delayed set, holding its
// group's place; a re-send of its id merges into it and puts it in its
// group's queue, where it holds no place: validation drops the place, and
// the merged message goes first (its group's head), its history kept.
func TestPriorityRetryMergedByAResendGoes(t *testing.T) {
	s := newFlowSlot(t, 2)
	s.flow.GroupPlaces = 1
	s.gsend("G", []string{"a"}, []float64{10})
	_, got := s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
	require.EqualValues(t, 4, s.groll(got[0], 60000, ""), "a retry in a minute, in the delayed set")
	require.Equal(t, []int64{3}, s.gsend("G", []string{"a"}, []float64{10}), "merged into the waiting retry")
	s.gsend("G", []string{"b"}, []float64{5})
	_, got = s.gfetch(10)
	require.Equal(t, []string{"a"}, ids(got))
	assert.Equal(t, 1, got[0].env.Failures, "the merged message keeps the retry's history")
	require.EqualValues(t, 1, s.gack(got[0]))
	_, got = s.gfetch(10)
	require.Equal(t, []string{"b"}, ids(got))
}

// A fetch whose slot holds so few places that no group can reach its
// limit takes without counting each group's places; near the limit it
// counts them, and never takes a place too many.
func TestGroupPlacesNearAndFarFromTheLimit(t *testing.T) {
	s := newFlowSlot(t, 3)
	s.flow.GroupPlaces = 5
	aIDs, aScores := seq("a", 10)
	s.gsend("A", aIDs, aScores)
	var all []delivered
	for _, want := range []int{2, 2, 1, 0} {
		_, got := s.gfetch(2)
		require.Len(t, got, want, "after %d in flight", len(all))
		all = append(all, got...)
	}
	assert.Len(t, s.places(), 5)
	require.EqualValues(t, 1, s.gack(all[0]))
	_, got := s.gfetch(2)
	require.Equal(t, []string{"a005"}, ids(got))
}
