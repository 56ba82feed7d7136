package zkcoord

import "sort"

// Assign returns the member each slot of a topic should belong to, given the
// live members (any order, duplicates ignored) and the current owner of each
// slot (owners[i], "" for none; members that are not live count as none).
//
// It is a pure function, so every worker computes the same assignment from
// the same view of ZooKeeper, and it is:
//   - balanced: every member gets slotAmount/n or slotAmount/n+1 slots (the
//     larger shares go to members ranked by a per-topic hash of their id);
//   - sticky: a slot stays with its current owner while that owner is live
//     and within its share, so a membership change moves only the slots that
//     must move (a departed member's, and the excess of members above their
//     new share: exactly the newcomer's share when a member joins a balanced
//     fleet, exactly the departed member's slots when one leaves);
//   - rendezvous-hashed for everything else: a slot that must move goes to
//     the member with the highest weight(topic, slot, member) that still has
//     room, highest weights first, so the result does not depend on the
//     order in which members joined.
//
// While slots move, owners change one slot at a time exactly as the previous
// result said; the result for the remaining slots does not change, so
// workers do not chase a moving target.
func Assign(topicName string, slotAmount int, members []string, owners []string) []string {
	out := make([]string, slotAmount)
	ms := uniqueSorted(members)
	n := len(ms)
	if n == 0 || slotAmount <= 0 {
		return out
	}
	index := make(map[string]int, n)
	for i, m := range ms {
		index[m] = i
	}
	held := make([][]int, n) // slots each live member owns now
	for s := 0; s < slotAmount && s < len(owners); s++ {
		if i, ok := index[owners[s]]; ok {
			held[i] = append(held[i], s)
		}
	}

	// Shares: q each, q+1 for the r members ranked first by a per-topic
	// rendezvous weight. The ranking depends on the member set only, so the
	// shares do not change while slots move.
	q, r := slotAmount/n, slotAmount%n
	rank := make([]int, n)
	for i := range rank {
		rank[i] = i
	}
	sort.Slice(rank, func(a, b int) bool {
		wa, wb := weight(topicName, -1, ms[rank[a]]), weight(topicName, -1, ms[rank[b]])
		if wa != wb {
			return wa > wb
		}
		return rank[a] < rank[b]
	})
	share := make([]int, n)
	for k, i := range rank {
		share[i] = q
		if k < r {
			share[i] = q + 1
		}
	}

	// Keep: each member keeps its best-weighted current slots up to its share.
	load := make([]int, n)
	for i, hs := range held {
		ws := make(map[int]uint64, len(hs))
		for _, s := range hs {
			ws[s] = weight(topicName, s, ms[i])
		}
		sort.Slice(hs, func(a, b int) bool {
			if ws[hs[a]] != ws[hs[b]] {
				return ws[hs[a]] > ws[hs[b]]
			}
			return hs[a] < hs[b]
		})
		for _, s := range hs[:min(len(hs), share[i])] {
			out[s] = ms[i]
			load[i]++
		}
	}

	// Place the rest by rendezvous weight, highest first, within shares.
	type pair struct {
		w    uint64
		slot int
		m    int
	}
	var pairs []pair
	for s := range out {
		if out[s] != "" {
			continue
		}
		for i := range ms {
			if load[i] < share[i] {
				pairs = append(pairs, pair{weight(topicName, s, ms[i]), s, i})
			}
		}
	}
	sort.Slice(pairs, func(a, b int) bool {
		if pairs[a].w != pairs[b].w {
			return pairs[a].w > pairs[b].w
		}
		if pairs[a].slot != pairs[b].slot {
			return pairs[a].slot < pairs[b].slot
		}
		return pairs[a].m < pairs[b].m
	})
	for _, p := range pairs {
		if out[p.slot] == "" && load[p.m] < share[p.m] {
			out[p.slot] = ms[p.m]
			load[p.m]++
		}
	}
	return out
}

// weight is the rendezvous weight of a member for a slot: FNV-1a of the
// topic, slot and member, finished with the SplitMix64 mixer.
func weight(topicName string, slot int, member string) uint64 {
	const prime = 1099511628211
	x := uint64(14695981039346656037) // FNV-1a offset basis
	for i := 0; i < len(topicName); i++ {
		x = (x ^ uint64(topicName[i])) * prime
	}
	x *= prime // the 0 separator
	for i := 56; i >= 0; i -= 8 {
		x = (x ^ uint64(slot)>>i&0xff) * prime
	}
	for i := 0; i < len(member); i++ {
		x = (x ^ uint64(member[i])) * prime
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func uniqueSorted(in []string) []string {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, m := range in {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}
