package inspect

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Listings across slots. Each slot's sorted set is already in order; a page
// of a whole topic is the first `limit` entries of the merge of those
// orders. mergePage reads only a few entries per slot at a time (about
// 2*limit in all, more only from the slots that turn out to hold the page),
// so it never loads a large queue.

// zentry is one sorted-set member of one slot.
type zentry struct {
	slot  int
	id    string
	score float64
}

// listOrder is the order of a listing. Within a slot it is Redis's own
// order of the sorted set (ascending, or REV: descending by score, then by
// member); between slots, equal scores go by slot index.
type listOrder struct{ rev bool }

func (o listOrder) before(a, b zentry) bool {
	if a.score != b.score {
		if o.rev {
			return a.score > b.score
		}
		return a.score < b.score
	}
	if a.slot != b.slot {
		return a.slot < b.slot
	}
	if o.rev {
		return a.id > b.id
	}
	return a.id < b.id
}

// zsource is one slot's sorted set, and the rank range (in listing order)
// the listing covers: [start, end).
type zsource struct {
	slot       int
	key        string
	start, end int64
}

// mergePage returns the first limit entries of the merged listing of srcs.
// Ranks are read in rounds; a slot is read further only while its last
// entry read could still precede the page's last entry. Entries written
// between rounds can shift ranks; an entry seen twice is kept once.
func (i *Inspector) mergePage(ctx context.Context, srcs []zsource, o listOrder, limit int) ([]zentry, error) {
	got := make([][]zentry, len(srcs))
	done := make([]bool, len(srcs))
	open := 0
	for j, s := range srcs {
		if s.start >= s.end {
			done[j] = true
		} else {
			open++
		}
	}
	if open == 0 {
		return nil, nil
	}
	first := max(1, min(limit, (2*limit+open-1)/open))
	want := make([]int, len(srcs))
	for j := range srcs {
		if !done[j] {
			want[j] = first
		}
	}
	var page []zentry
	for {
		var todo []int
		for j, w := range want {
			if w > 0 && !done[j] {
				todo = append(todo, j)
			}
		}
		if len(todo) == 0 {
			return page, nil
		}
		cmds := make([]*redis.ZSliceCmd, len(todo))
		err := i.pipelined(ctx, len(todo), func(pipe redis.Pipeliner, n int) {
			j := todo[n]
			from := srcs[j].start + int64(len(got[j]))
			to := min(from+int64(want[j]), srcs[j].end) - 1
			cmds[n] = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: srcs[j].key, Start: from, Stop: to, Rev: o.rev})
		})
		if err != nil {
			return nil, err
		}
		for n, j := range todo {
			vals := cmds[n].Val()
			for _, z := range vals {
				id, _ := z.Member.(string)
				got[j] = append(got[j], zentry{slot: srcs[j].slot, id: id, score: z.Score})
			}
			if len(vals) < want[j] || srcs[j].start+int64(len(got[j])) >= srcs[j].end {
				done[j] = true
			}
			want[j] = 0
		}

		page = page[:0]
		for _, es := range got {
			page = append(page, es...)
		}
		slices.SortFunc(page, func(a, b zentry) int {
			switch {
			case o.before(a, b):
				return -1
			case o.before(b, a):
				return 1
			}
			return 0
		})
		page = dedupe(page)
		if len(page) > limit {
			page = page[:limit]
		}
		// A slot must be read further if what it has not yet shown could
		// belong to the page: the page is short, or the slot's last entry
		// read comes before the page's last entry.
		for j := range srcs {
			if done[j] {
				continue
			}
			n := len(got[j])
			if n >= limit {
				continue
			}
			if len(page) < limit || o.before(got[j][n-1], page[len(page)-1]) {
				want[j] = min(max(n, first), limit-n)
			}
		}
	}
}

// dedupe keeps the first of entries naming the same member of the same slot.
func dedupe(es []zentry) []zentry {
	type key struct {
		slot int
		id   string
	}
	seen := make(map[key]bool, len(es))
	out := es[:0]
	for _, e := range es {
		k := key{e.slot, e.id}
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}
