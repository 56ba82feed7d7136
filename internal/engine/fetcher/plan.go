package fetcher

import (
	"context"
	"math"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/engine/redisops"
)

// plan decides the next fetch. Messages must leave a topic in order across
// its slots (earliest due, or highest priority, first). Where one script
// call may name several slots (f.p.Merged), the due slots go to fetch.lua
// together and it takes the best messages across them. Otherwise, with one free
// handler, or one due slot, that is one fetch from the best slot bounded by
// the next-best head. With more capacity and several due slots, fetching
// run by run would cost a round trip per message, so plan first reads the
// top entries of the candidate slots (one pipelined read), merges them to
// find the messages that fill the free handlers, and fetches exactly those
// counts, bounded by the last one's score, from every slot at once.
func (f *Fetcher) plan(ctx context.Context, nowMs int64, free int, ahead int64) []redisops.FetchReq {
	f.turn = (f.turn + 1) % len(f.heads)
	// With a lookahead (ahead ms, merged fetches only), messages due up to
	// ahead from now are taken too: the hub holds them for their instant.
	upto := nowMs + ahead
	due := f.dueSlots(upto)
	if len(due) == 0 {
		return nil
	}
	if f.p.Merged {
		return f.planMerged(due, free, upto, ahead > 0)
	}
	// Only slots whose head is among the best `free` heads can hold one of
	// the best `free` messages.
	if len(due) > free {
		due = due[:free]
	}
	if free == 1 || len(due) == 1 {
		return f.planOne(due, free)
	}
	type entry struct {
		slot  int
		score float64
	}
	// Read a share of each slot, not `free` of each: a slot whose read was
	// cut short bounds how far the merged order can be trusted.
	per := max(2, (2*free+len(due)-1)/len(due))
	peeks := f.peek(ctx, due, per, nowMs)
	if peeks == nil {
		return f.planOne(due, free)
	}
	var entries []entry
	var cut *float64
	for i, zs := range peeks {
		for _, z := range zs {
			entries = append(entries, entry{due[i], z.Score})
		}
		if len(zs) == per {
			last := zs[len(zs)-1].Score
			if cut == nil || redisops.BetterScore(f.timeBased(), last, *cut) {
				cut = &last
			}
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if entries[i].score != entries[j].score {
			return redisops.BetterScore(f.timeBased(), entries[i].score, entries[j].score)
		}
		return f.tieFirst(entries[i].slot, entries[j].slot)
	})
	if cut != nil {
		n := 0
		for n < len(entries) && !redisops.BetterScore(f.timeBased(), *cut, entries[n].score) {
			n++
		}
		entries = entries[:n]
	}
	if len(entries) > free {
		entries = entries[:free]
	}
	if len(entries) == 0 {
		return f.planOne(due, free)
	}
	bound := formatScore(entries[len(entries)-1].score)
	count := map[int]int{}
	for _, e := range entries {
		count[e.slot]++
	}
	reqs := make([]redisops.FetchReq, 0, len(count))
	for _, s := range due {
		if n := min(count[s], f.c.SlotFree(s)); n > 0 {
			reqs = append(reqs, redisops.FetchReq{Slot: s, N: n, Bound: bound})
		}
	}
	return reqs
}

// peek reads up to n fetchable entries (ids and scores) of each slot in
// consume order, pipelined. It writes nothing; nil means the read failed.
func (f *Fetcher) peek(ctx context.Context, slotList []int, n int, nowMs int64) [][]redis.Z {
	pipe := f.p.RDB.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(slotList))
	for i, s := range slotList {
		args := redis.ZRangeArgs{Key: f.p.Keys[s].Store, ByScore: true, Count: int64(n)}
		if f.timeBased() {
			args.Start, args.Stop = "-inf", strconv.FormatInt(nowMs, 10)
		} else {
			args.Start, args.Stop, args.Rev = "+inf", "-inf", true
		}
		cmds[i] = pipe.ZRangeArgsWithScores(ctx, args)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	out := make([][]redis.Z, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out
}

// planMerged plans one fetch.lua call across slots (f.p.Merged). It need not
// name every due slot: the best k, bounded by the next one's head, take
// messages in order as well. Each slot named costs the script a read and
// three writes whether it gives one message or fifty, so k is as many as
// the last fetches suggest will fill the free handlers (and no more than
// free: only slots whose head is among the best free heads can give one of
// the best free messages): few when slots hold a backlog, all of them when
// messages come due one or two per slot at a time.
func (f *Fetcher) planMerged(due []int, free int, upto int64, ahead bool) []redisops.FetchReq {
	k := min(len(due), free)
	if f.yield > 0 {
		k = min(k, max(1, int(math.Ceil(float64(free)/f.yield))))
	}
	bound, bounded := 0.0, false
	if k < len(due) {
		if next := f.heads[due[k]]; next.known && !next.empty {
			bound, bounded = next.score, true
		} else {
			// The rest are empty: nothing to bound by.
			k = len(due)
		}
	}
	// A lookahead fetch takes nothing due after upto.
	if ahead && (!bounded || float64(upto) < bound) {
		bound, bounded = float64(upto), true
	}
	bs := ""
	if bounded {
		bs = formatScore(bound)
	}
	reqs := make([]redisops.FetchReq, 0, k)
	for i, s := range due {
		// A slot whose messages were all blocked is due for a second look
		// (a wake-up may have been missed) and sorts last: it goes along,
		// so a busy topic cannot keep it waiting.
		if i < k || f.heads[s].empty {
			reqs = append(reqs, redisops.FetchReq{Slot: s, N: min(free, f.c.SlotFree(s)), Bound: bs, Ahead: ahead})
		}
	}
	return reqs
}
