package zkcoord

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func memberIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func shares(a []string) map[string]int {
	out := map[string]int{}
	for _, m := range a {
		out[m]++
	}
	return out
}

// settle returns the assignment a fleet reaches from owners by following
// the targets one slot at a time in a random order, and how many slots
// changed hands on the way (a release and a claim count as one move).
func settle(t *testing.T, topicName string, slotAmount int, members, owners []string, rng *rand.Rand) ([]string, int) {
	t.Helper()
	owners = slices.Clone(owners)
	live := map[string]bool{}
	for _, m := range members {
		live[m] = true
	}
	for s, o := range owners {
		if !live[o] {
			owners[s] = "" // a departed member's node is gone
		}
	}
	first := Assign(topicName, slotAmount, members, owners)
	moves := 0
	for s := range owners {
		if owners[s] != first[s] && owners[s] != "" {
			moves++
		}
	}
	for step := 0; ; step++ {
		require.Less(t, step, 4*slotAmount+10, "no convergence")
		target := Assign(topicName, slotAmount, members, owners)
		// The targets of slots not yet settled never change on the way.
		for s := range target {
			require.Equal(t, first[s], target[s], "slot %d re-targeted at step %d", s, step)
		}
		var pending []int
		for s := range owners {
			if owners[s] != target[s] {
				pending = append(pending, s)
			}
		}
		if len(pending) == 0 {
			return owners, moves
		}
		s := pending[rng.IntN(len(pending))]
		if owners[s] != "" {
			owners[s] = "" // the owner releases first
		} else {
			owners[s] = target[s]
		}
	}
}

func TestAssignBalancedAndDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, slotAmount := range []int{1, 2, 8, 64, 1024} {
		for n := 1; n <= 9; n++ {
			ms := memberIDs(fmt.Sprintf("w%d", rng.IntN(1000)), n)
			a := Assign("orders", slotAmount, ms, nil)
			got := shares(a)
			q := slotAmount / n
			total := 0
			for _, m := range ms {
				assert.Contains(t, []int{q, q + 1}, got[m], "slots=%d n=%d member %s", slotAmount, n, m)
				total += got[m]
			}
			assert.Equal(t, slotAmount, total, "every slot has a member")
			assert.NotContains(t, a, "")

			shuffled := slices.Clone(ms)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			assert.Equal(t, a, Assign("orders", slotAmount, append(shuffled, ms[0]), nil), "order and duplicates do not matter")
		}
	}
	assert.Equal(t, []string{"", ""}, Assign("t", 2, nil, nil))
}

// Joins and departures move the fewest slots possible: a newcomer's share
// when a member joins, the departed member's slots when one leaves, and
// nothing else.
func TestAssignMovesTheFewestSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for slotAmount, trials := range map[int]int{8: 12, 64: 3, 200: 1} {
		for trial := 0; trial < trials; trial++ {
			all := memberIDs(fmt.Sprintf("t%d", trial), 7)
			members := all[:1]
			owners, _ := settle(t, "topic", slotAmount, members, make([]string, slotAmount), rng)
			for step := 0; step < 12; step++ {
				next := slices.Clone(members)
				join := len(members) == 1 || (len(members) < len(all) && rng.IntN(2) == 0)
				var who string
				if join {
					for _, m := range all {
						if !slices.Contains(members, m) {
							who = m
							break
						}
					}
					next = append(next, who)
				} else {
					who = members[rng.IntN(len(members))]
					next = slices.DeleteFunc(next, func(m string) bool { return m == who })
				}
				settled, moves := settle(t, "topic", slotAmount, next, owners, rng)
				sh := shares(settled)
				if join {
					assert.Equal(t, sh[who], moves, "join of %s: moves vs its share (slots=%d, %d members)", who, slotAmount, len(next))
				} else {
					assert.Equal(t, 0, moves, "leave of %s: no live member gives up a slot", who)
					for s := range owners {
						if owners[s] != who {
							assert.Equal(t, owners[s], settled[s], "slot %d of a remaining member moved", s)
						}
					}
				}
				q := slotAmount / len(next)
				for _, m := range next {
					assert.Contains(t, []int{q, q + 1}, sh[m])
				}
				members, owners = next, settled
			}
		}
	}
}

// The assignment is part of the wire protocol between workers of different
// versions: pin it.
func TestAssignGolden(t *testing.T) {
	a := Assign("orders", 8, []string{"a", "b", "c"}, nil)
	assert.Equal(t, "c b a a c c a b", strings.Join(a, " "))
	assert.Equal(t, uint64(0x59cd8ff55592d4f1), weight("orders", 3, "b"))
}
