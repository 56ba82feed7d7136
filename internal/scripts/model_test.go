package scripts_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// model is what the scripts must keep for each id of one slot.
type model struct {
	waiting  bool  // in store
	token    int64 // current delivery, 0 if none
	dead     bool
	fails    int  // failed attempts of the waiting/in-flight message
	resent   bool // a send arrived during the current delivery
	oldToken []int64
}

// TestInvariantsUnderRandomOperations drives one slot with random sends,
// fetches, acks, rollbacks (current and stale), expiries, sweeps and
// removes, and after every step compares Redis with a model of what must
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
			case st.waiting:
				require.Contains(t, []int64{2, 3}, res, "step %d: merge %s", step, what)
			case st.token != 0:
				require.EqualValues(t, 4, res, "step %d: re-send during prepare %s", step, what)
				st.resent = true
				st.fails = 0
			default:
				require.EqualValues(t, 1, res, "step %d: new %s", step, what)
				st.fails = 0
			}
			st.waiting = true
		}
		// acked checks one ack's result against the model and applies it.
		acked := func(st *model, token, res int64, what string) {
			if st.token == 0 || token != st.token {
				require.EqualValues(t, 0, res, "step %d: stale ack %s", step, what)
				return
			}
			require.EqualValues(t, 1, res, "step %d: ack %s", step, what)
			st.oldToken = append(st.oldToken, st.token)
			st.token = 0
			if !st.waiting {
				st.fails = 0
			}
		}
		switch r := rng.IntN(100); {
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
			head, got := s.fetchWindow(n, 30, n+rng.IntN(3))
			require.Equal(t, s.head(), head, "step %d: head after fetch", step)
			eligible := 0
			for _, x := range m {
				if x.waiting && x.token == 0 {
					eligible++
				}
			}
			require.Len(t, got, min(n, eligible), "step %d: fetch takes min(n, eligible)", step)
			for _, d := range got {
				x := m[d.id]
				require.True(t, x.waiting && x.token == 0, "step %d: fetched %s which was not fetchable", step, d.id)
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
			case st.waiting:
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
			case st.waiting:
			case attempt > maxRetries:
				st.dead, st.fails = true, 0
			default:
				st.waiting, st.fails = true, attempt
			}
		case r < 94:
			op = "remove"
			res := s.remove(id)
			if st.waiting {
				require.EqualValues(t, 1, res, "step %d", step)
				st.waiting = false
				if st.token == 0 {
					st.fails = 0
				}
			} else {
				require.EqualValues(t, 0, res, "step %d", step)
			}
		default:
			op = "stale-extend"
			require.EqualValues(t, 0, s.extend(30, id, staleToken(st, rng)), "step %d", step)
		}
		for _, cid := range ids {
			x := m[cid]
			want := where{store: x.waiting, prepare: x.token != 0, dead: x.dead,
				msg: x.waiting || x.token != 0, deadmsg: x.dead}
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
