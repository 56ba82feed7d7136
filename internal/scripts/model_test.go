package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// model is what the scripts must keep for each id of one slot.
type model struct {
	waiting  bool  // in store
	token    int64 // current delivery, 0 if none
	dead     bool
	fails    int  // failed attempts of the waiting/in-flight message
	resent   bool // a send arrived during the current delivery
	oldToken []int64
	// tombstone: a delivery removed by id (remove.lua) left token 0 in
	// prepare; it blocks the id until the sweeper clears it.
	tombstone bool
	delayed   bool // waiting in the delayed set (priority, not before a time)
	expiring  bool // waiting with an expiry already past: dropped when touched
	snoozes   int
}

// TestInvariantsUnderRandomOperations drives one slot with random sends
// (plain, delayed, already expired), fetches, acks, rollbacks (current and
// stale), snoozes, lease expiries, sweeps and removes, and after every step compares Redis with a model of what must
// hold: a message is in exactly one of store/prepare/dead or gone by ack or
// remove; bodies exist exactly for what is waiting, in flight or dead; no
// stale call changes anything.
func TestInvariantsUnderRandomOperations(t *testing.T) {
	for _, typ := range []int{2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			runModel(t, typ, 1500, uint64(typ))
		})
	}
}

func runModel(t *testing.T, typ int, steps int, seed uint64) {
	s := newSlot(t, typ)
	rng := rand.New(rand.NewPCG(seed, 42))
	const maxRetries = 2
	ids := []string{"a", "b", "c", "d", "e"}
	m := map[string]*model{}
	for _, id := range ids {
		m[id] = &model{}
	}
	score := func() float64 {
		if typ == 2 {
			return float64(17 + rng.IntN(100))
		}
		return past() - float64(rng.IntN(1000))
	}
	for step := 0; step < steps; step++ {
		id := ids[rng.IntN(len(ids))]
		st := m[id]
		var op string
		// sent checks one send's result against the model and applies it.
		sent := func(st *model, res int64, what string) {
			switch {
			case st.waiting || st.delayed:
				require.Contains(t, []int64{2, 3}, res, "step %d: merge %s", step, what)
			case st.token != 0:
				require.EqualValues(t, 4, res, "step %d: re-send during prepare %s", step, what)
				st.resent = true
				st.fails, st.snoozes = 0, 0
			default:
				require.EqualValues(t, 1, res, "step %d: new %s", step, what)
				st.fails, st.snoozes = 0, 0
			}
			st.waiting, st.delayed, st.expiring = true, false, false
		}
		// acked checks one ack's result against the model and applies it.
		acked := func(st *model, token, res int64, what string) {
			if st.token == 0 || token != st.token {
				// Refused; "gone" (2) when the id is nowhere (dead is
				// somewhere), which is what a resent ack of a success sees.
				want := int64(0)
				if st.token == 0 && !st.waiting && !st.delayed && !st.tombstone && !st.dead {
					want = 2
				}
				require.EqualValues(t, want, res, "step %d: stale ack %s", step, what)
				return
			}
			require.EqualValues(t, 1, res, "step %d: ack %s", step, what)
			st.oldToken = append(st.oldToken, st.token)
			st.token = 0
			if !st.waiting && !st.delayed {
				st.fails = 0
			}
		}
		switch r := rng.IntN(120); {
		case r < 20:
			op = "send"
			sent(st, s.send(id, score(), fmt.Sprintf("%s-%d", id, step)), id)
		case r < 30:
			// Several sends in one call, an id possibly more than once: each
			// must come out as if sent by a call of its own, in order.
			op = "send-batch"
			var bids, bodies []string
			var scores []float64
			for range 2 + rng.IntN(5) {
				bid := ids[rng.IntN(len(ids))]
				bids = append(bids, bid)
				scores = append(scores, score())
				bodies = append(bodies, fmt.Sprintf("%s-%d-%d", bid, step, len(bids)))
			}
			res := s.sendAll(bids, scores, bodies)
			for i, bid := range bids {
				sent(m[bid], res[i], bid)
			}
		case r < 35:
			// Several acks in one call: current, stale and repeated ones.
			op = "ack-batch"
			var aids []string
			var tokens []int64
			for range 2 + rng.IntN(4) {
				aid := ids[rng.IntN(len(ids))]
				tok := m[aid].token
				if tok == 0 || rng.IntN(4) == 0 {
					tok = staleToken(m[aid], rng)
				}
				aids = append(aids, aid)
				tokens = append(tokens, tok)
			}
			res := s.ackAll(aids, tokens)
			for i, aid := range aids {
				acked(m[aid], tokens[i], res[i], aid)
			}
		case r < 50:
			op = "fetch"
			n := 1 + rng.IntN(3)
			// Windows as small as n make fetch read several of them when
			// ids are blocked, and find the head in what it read.
			reply := s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: 30, Window: n + rng.IntN(3),
				Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n}}})
			head, got := reply.Heads[0], deliveries(t, reply)
			require.Equal(t, s.head(), head, "step %d: head after fetch", step)
			eligible := 0
			for _, x := range m {
				if x.waiting && x.token == 0 && !x.tombstone {
					eligible++
				}
			}
			// An expired message the fetch took is dropped, not delivered.
			dropped := 0
			for cid, x := range m {
				if x.waiting && x.token == 0 && !x.tombstone && x.expiring && !s.where(cid).store {
					dropped++
					x.waiting, x.expiring, x.fails, x.snoozes = false, false, 0, 0
				}
			}
			require.Equal(t, dropped, reply.Expired, "step %d: expired count", step)
			require.Len(t, got, min(n, eligible)-dropped, "step %d: fetch takes min(n, eligible)", step)
			for _, d := range got {
				x := m[d.id]
				require.True(t, x.waiting && x.token == 0 && !x.tombstone && !x.expiring, "step %d: fetched %s which was not fetchable", step, d.id)
				require.EqualValues(t, x.fails+1, d.token%1000, "step %d: attempt of %s", step, d.id)
				require.Equal(t, d.env.Score, d.score, "step %d: store score of %s", step, d.id)
				x.waiting, x.token, x.resent = false, d.token, false
			}
		case r < 65:
			op = "ack"
			tok := st.token
			if tok == 0 {
				op = "stale-ack"
				tok = staleToken(st, rng)
			}
			acked(st, tok, s.ack(id, tok), id)
		case r < 80:
			op = "rollback"
			if st.token == 0 {
				op = "stale-rollback"
				require.EqualValues(t, 0, s.rollback(maxRetries, id, staleToken(st, rng), "stale"), "step %d", step)
				break
			}
			res := s.rollback(maxRetries, id, st.token, "boom")
			attempt := int(st.token % 1000)
			st.oldToken = append(st.oldToken, st.token)
			st.token = 0
			switch {
			case st.waiting || st.delayed:
				require.EqualValues(t, 2, res, "step %d: superseded", step)
			case attempt > maxRetries:
				require.EqualValues(t, 3, res, "step %d: dead", step)
				st.dead, st.fails = true, 0
			default:
				require.EqualValues(t, 4, res, "step %d: retry", step)
				st.waiting, st.fails = true, attempt
			}
		case r < 88:
			op = "expire+sweep"
			if st.tombstone {
				// The sweeper clears a tombstone and redelivers nothing.
				s.expire(id)
				require.EqualValues(t, 0, s.sweep(maxRetries), "step %d", step)
				st.tombstone = false
				break
			}
			if st.token == 0 {
				require.EqualValues(t, 0, s.sweep(maxRetries))
				break
			}
			s.expire(id)
			require.EqualValues(t, 1, s.sweep(maxRetries), "step %d", step)
			attempt := int(st.token % 1000)
			st.oldToken = append(st.oldToken, st.token)
			st.token = 0
			switch {
			case st.waiting || st.delayed:
			case attempt > maxRetries:
				st.dead, st.fails = true, 0
			default:
				st.waiting, st.fails = true, attempt
			}
		case r < 94:
			op = "remove"
			// Removed wherever it is: 1 waiting, 4 in flight (then a
			// tombstone is left in prepare).
			res := s.remove(id)
			want := int64(0)
			if st.waiting {
				want++
			}
			if st.delayed {
				want += 2
			}
			if st.token != 0 {
				want += 4
				st.oldToken = append(st.oldToken, st.token)
				st.token, st.tombstone = 0, true
			}
			require.EqualValues(t, want, res, "step %d", step)
			st.waiting, st.delayed, st.expiring, st.fails, st.snoozes = false, false, false, 0, 0
		case r < 100:
			op = "stale-extend"
			require.EqualValues(t, 0, s.extend(30, id, staleToken(st, rng)), "step %d", step)
		case r < 106:
			op = "snooze"
			if st.token == 0 {
				op = "stale-snooze"
				require.EqualValues(t, 0, s.rollbackHow(maxRetries, 0, id, staleToken(st, rng), "s0"), "step %d", step)
				break
			}
			res := s.rollbackHow(maxRetries, 0, id, st.token, "s0")
			attempt := int(st.token % 1000)
			st.oldToken = append(st.oldToken, st.token)
			st.token = 0
			switch {
			case st.waiting || st.delayed:
				require.EqualValues(t, 2, res, "step %d: superseded", step)
			case st.snoozes < 100:
				require.EqualValues(t, 6, res, "step %d: snoozed", step)
				st.waiting = true
				st.snoozes++
			case attempt > maxRetries:
				require.EqualValues(t, 3, res, "step %d: dead", step)
				st.dead, st.fails = true, 0
			default:
				require.EqualValues(t, 4, res, "step %d: retry", step)
				st.waiting, st.fails = true, attempt
			}
		case r < 112 && typ == 2:
			op = "send-delayed"
			res := s.sendOpts(id, score(), scripts.Options{NotBeforeMs: future()}, fmt.Sprintf("%s-%d", id, step))
			sent(st, res, id)
			st.waiting, st.delayed = false, true
		default:
			op = "send-expiring"
			res := s.sendOpts(id, score(), scripts.Options{ExpiresAtMs: int64(past())}, fmt.Sprintf("%s-%d", id, step))
			sent(st, res, id)
			st.expiring = true
		}
		for _, cid := range ids {
			x := m[cid]
			want := where{store: x.waiting, prepare: x.token != 0 || x.tombstone, dead: x.dead,
				msg: x.waiting || x.delayed || x.token != 0, deadmsg: x.dead, delayed: x.delayed}
			require.Equal(t, want, s.where(cid), "step %d (%s %s): state of %s", step, op, id, cid)
		}
	}
}

// staleToken returns a token that is not the id's current delivery.
func staleToken(st *model, rng *rand.Rand) int64 {
	if len(st.oldToken) > 0 && rng.IntN(2) == 0 {
		return st.oldToken[rng.IntN(len(st.oldToken))]
	}
	// Attempt 0 is never delivered, so this token cannot be a live one
	// (a salt-and-attempt guess such as 999001 could be: salts run 0-999).
	return int64(rng.IntN(1000) * 1000)
}
