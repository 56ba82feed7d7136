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

// pmsg is one message of a sendbatch.lua call in these tests.
type pmsg struct {
	id    string
	score float64
	nonce uint64
	opts  scripts.Options
	body  string
}

// sendCall sends msgs in one sendbatch.lua call, packed (each message's
// envelope built by the caller, first sent at firstMs) or not, with an
// options argument per message when withOpts, and returns the reply.
func (s *slot) sendCall(msgs []pmsg, packed, withOpts, clock bool, firstMs int64) []int64 {
	s.t.Helper()
	typ := s.typ
	if withOpts {
		typ += 4
	}
	if packed {
		typ += scripts.SendBatchPacked
	}
	if clock {
		typ += scripts.SendBatchClock
	}
	args := []any{"PUBLISH", typ, len(msgs)}
	for _, m := range msgs {
		args = append(args, m.id, strconv.FormatFloat(m.score, 'f', -1, 64), m.nonce)
		opts := scripts.EncodeOptions(m.opts)
		if withOpts {
			args = append(args, opts)
		}
		if packed {
			args = append(args, scripts.SendEnvelope(s.typ, firstMs, m.score, m.nonce, opts, []byte(m.body)))
		} else {
			args = append(args, m.body)
		}
	}
	res, err := scripts.SendBatch.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed}, args...).Int64Slice()
	require.NoError(s.t, err)
	return res
}

// A packed group (the producer's envelopes, SendBatchPacked) answers and
// writes what an unpacked one does, for priority and fixed-time messages,
// with and without options: new ids alone (HSETNX) and several in a call
// (HMGET), an id twice in one call, a send into a waiting message, a rerun,
// an id in flight, a priority message held back by its not-before time.
// Only the first-sent times differ: the packed ones are the caller's.
func TestSendBatchPackedMatchesUnpacked(t *testing.T) {
	for _, typ := range []int{2, 3} {
		for _, withOpts := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/opts=%v", typ, withOpts), func(t *testing.T) {
				testSendBatchPacked(t, typ, withOpts)
			})
		}
	}
}

func testSendBatchPacked(t *testing.T, typ int, withOpts bool) {
	plain, packed := newSlot(t, typ), newSlot(t, typ)
	subPlain, subPacked := plain.subscribeWake(), packed.subscribeWake()
	base := past()
	if typ == 2 {
		base = 100
	}
	var o1, o2 scripts.Options
	if withOpts {
		o1 = scripts.Options{MaxRetries: 3, HasMaxRetries: true, Headers: map[string]string{"k": "v"}}
		o2 = scripts.Options{TimeoutMs: 2500}
	}
	calls := [][]pmsg{
		{{"a", base, 101, o1, "a1"}},                                                      // new, alone
		{{"b", base + 10, 102, o2, "b1"}, {"c", base + 20, 103, o1, "c1"}},                // new, several
		{{"b", base + 10, 102, o2, "b1"}, {"c", base + 20, 103, o1, "c1"}},                // a rerun
		{{"a", base + 5, 104, o2, "a2"}, {"d", base - 5, 105, o1, "d1"}},                  // into a waiting one; new, first
		{{"e", base + 30, 106, o1, "e1"}, {"e", base + 31, 107, o2, "e2"}},                // one id twice in a call
		{{"f", base + 40, 108, scripts.Options{}, "f1"}, {"g", base + 50, 109, o2, "g1"}}, // no options beside some
	}
	if typ == 2 && withOpts {
		nbf := int64(past()) + 60_000
		calls = append(calls, []pmsg{{"h", base + 60, 110, scripts.Options{NotBeforeMs: nbf}, "h1"}, {"i", base + 70, 111, o1, "i1"}})
	}
	firstMs := time.Now().UnixMilli()
	for i, c := range calls {
		r1 := plain.sendCall(c, false, withOpts, false, 0)
		r2 := packed.sendCall(c, true, withOpts, false, firstMs)
		assert.Equal(t, r1, r2, "call %d: results", i)
		p1, ok1 := plain.wakeWithin(subPlain, 100*time.Millisecond)
		p2, ok2 := packed.wakeWithin(subPacked, 100*time.Millisecond)
		assert.Equal(t, ok1, ok2, "call %d: woken", i)
		assert.Equal(t, p1, p2, "call %d: wake payload", i)
	}
	// In flight: fetched, then sent again (stored behind it).
	_, got1 := plain.fetch(1, 30)
	_, got2 := packed.fetch(1, 30)
	require.Len(t, got1, 1)
	require.Len(t, got2, 1)
	require.Equal(t, got1[0].id, got2[0].id)
	again := []pmsg{{got1[0].id, base + 1, 120, o1, "again"}}
	assert.Equal(t, plain.sendCall(again, false, withOpts, false, 0), packed.sendCall(again, true, withOpts, false, firstMs), "a send of an id in flight")

	s1, s2 := plain.state(), packed.state()
	assert.Equal(t, s1.Store, s2.Store)
	assert.Equal(t, s1.Delayed, s2.Delayed)
	assert.Equal(t, len(s1.Prepare), len(s2.Prepare))
	require.Equal(t, len(s1.Msg), len(s2.Msg))
	for id := range s1.Msg {
		e1, e2 := plain.envelope(plain.k.Msg, id), packed.envelope(packed.k.Msg, id)
		if (id == "f" || id == "g") && id != got1[0].id {
			// Stored new by a packed call: first sent at the caller's ms.
			assert.EqualValues(t, firstMs, e2.FirstSentMs, id)
		}
		e1.FirstSentMs, e2.FirstSentMs = 0, 0
		assert.Equal(t, e1, e2, "envelope of %s", id)
	}
}

// A call asks for Redis's clock with SendBatchClock on a group: it comes
// after the results. A packed range-merge group is refused with nothing
// written (its window starts from Redis's clock), even after a group that
// was fine.
func TestSendBatchClockAndPackedRangeMerge(t *testing.T) {
	s := newSlot(t, 3)
	before := time.Now()
	res := s.sendCall([]pmsg{{"a", past(), 1, scripts.Options{}, "x"}}, true, false, true, before.UnixMilli())
	require.Len(t, res, 2)
	assert.EqualValues(t, 1, res[0])
	assert.InDelta(t, before.UnixMicro(), res[1], float64(time.Second.Microseconds()), "Redis's µs")

	rm := newSlot(t, 1)
	args := []any{"PUBLISH", 3, 1, 1 + scripts.SendBatchPacked, 1,
		"ok", strconv.FormatFloat(past(), 'f', -1, 64), 1, scripts.SendEnvelope(3, 0, past(), 1, nil, []byte("x")),
		"rm", "1000", 2, scripts.SendEnvelope(1, 0, 1000, 2, nil, []byte("y"))}
	keys := []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed, rm.k.Store, rm.k.Prepare, rm.k.Msg, rm.k.Wake, rm.k.Delayed}
	err := scripts.SendBatch.Run(s.ctx, s.rdb, keys, args...).Err()
	require.ErrorContains(t, err, "range-merge group cannot come packed")
	for _, k := range []string{rm.k.Msg, rm.k.Store} {
		n, err := s.rdb.Exists(s.ctx, k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, k)
	}
	ok, err := s.rdb.HExists(s.ctx, s.k.Msg, "ok").Result()
	require.NoError(t, err)
	assert.False(t, ok, "the first group wrote nothing either")
}
