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

// send1 sends one message through send1.lua, as the producer's single
// sends do: with stamp, asking for Redis's clock (its reply carries it),
// else with the local clock as the first-send time.
func (s *slot) send1(id string, score float64, body, nonce string, stamp bool) int64 {
	s.t.Helper()
	typ := s.typ
	if stamp {
		typ += scripts.Send1Stamp
	}
	n, err := strconv.ParseUint(nonce, 10, 64)
	require.NoError(s.t, err)
	before := time.Now()
	res, err := scripts.Send1.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed},
		"PUBLISH", typ, id, strconv.FormatFloat(score, 'f', -1, 64),
		scripts.SendEnvelope(s.typ, time.Now().UnixMilli(), score, n, nil, []byte(body))).Int64Slice()
	require.NoError(s.t, err)
	if stamp || s.typ == 1 {
		require.Len(s.t, res, 2, "Redis's clock returned")
		assert.InDelta(s.t, before.UnixMicro(), res[1], float64(time.Second.Microseconds()), "Redis's µs")
	} else if res[0] == 1 {
		require.Len(s.t, res, 1, "a new message's fast path reads no clock")
	}
	return res[0]
}

// send1.lua answers and writes what sendbatch.lua does for one message of
// each type in every state its id can be in (new, waiting, in flight, a
// rerun), and wakes the slot alike; only the envelopes' first-sent times
// (Redis's clock at each send) may differ.
func TestSend1MatchesSendBatch(t *testing.T) {
	for _, typ := range []int{1, 2, 3} {
		for _, stamp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/stamp=%v", typ, stamp), func(t *testing.T) {
				testSend1MatchesSendBatch(t, typ, stamp)
			})
		}
	}
}

func testSend1MatchesSendBatch(t *testing.T, typ int, stamp bool) {
	one, batch := newSlot(t, typ), newSlot(t, typ)
	subOne, subBatch := one.subscribeWake(), batch.subscribeWake()
	base := float64(time.Now().Add(time.Hour).UnixMilli())
	if typ == 1 {
		base = 3_600_000
	}
	if typ == 2 {
		base = 100
	}
	type step struct {
		id    string
		score float64
		nonce string
	}
	steps := []step{
		{"a", base, "101"},      // new, the first: heads the slot
		{"b", base + 10, "102"}, // new, behind a: no wake
		{"b", base + 10, "102"}, // a rerun of the same send
		{"a", base + 5, "103"},  // a send into a waiting message
		{"c", base - 5, "104"},  // new: earlier (fixed-time, range-merge) or lower (priority)
	}
	for i, st := range steps {
		body := "v" + strconv.Itoa(i)
		r1 := one.send1(st.id, st.score, body, st.nonce, stamp)
		r2 := batch.sendNonce(st.id, st.score, body, st.nonce)
		assert.Equal(t, r2, r1, "step %d (%s): result", i, st.id)
		p1, ok1 := one.wakeWithin(subOne, 100*time.Millisecond)
		p2, ok2 := batch.wakeWithin(subBatch, 100*time.Millisecond)
		assert.Equal(t, ok2, ok1, "step %d (%s): woken", i, st.id)
		if typ != 1 {
			assert.Equal(t, p2, p1, "step %d (%s): wake payload", i, st.id)
		}
	}
	// In flight: fetched, then sent again (stored behind it).
	_, got1 := one.fetch(10, 30)
	_, got2 := batch.fetch(10, 30)
	require.Len(t, got1, len(got2))
	if len(got1) > 0 {
		id := got1[0].id
		assert.Equal(t, batch.sendNonce(id, base, "again", "105"), one.send1(id, base, "again", "105", stamp), "a send of an id in flight")
	}
	s1, s2 := one.state(), batch.state()
	if typ != 1 {
		// Range-merge scores start from each send's clock.
		assert.Equal(t, s2.Store, s1.Store)
	}
	assert.Equal(t, len(s2.Prepare), len(s1.Prepare))
	for id := range s2.Msg {
		e1, e2 := one.envelope(one.k.Msg, id), batch.envelope(batch.k.Msg, id)
		e1.FirstSentMs, e2.FirstSentMs = 0, 0
		if typ == 1 {
			e1.Score, e2.Score, e1.OrigScore, e2.OrigScore = 0, 0, 0, 0
		}
		assert.Equal(t, e2, e1, "envelope of %s", id)
	}
}
