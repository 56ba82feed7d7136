package dashboard

// Reads the rmq.Inspector does not offer (yet): waiting messages paged by
// cursor (Peek has no cursor), in-flight deliveries with their lease, and
// counts of waiting messages by due time. They read the topic's sorted sets
// by rank and count only (ZRANK, ZCOUNT, ZRANGE of one page per slot), so
// their cost does not grow with the size of a queue. They belong in the
// Inspector; until they are there, they live here and nowhere else.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// errBadCursor is the answer to a cursor this package did not write.
var errBadCursor = errors.New("dashboard: invalid cursor")

// zitem is one member of one slot's sorted set.
type zitem struct {
	Slot  int
	ID    string
	Score float64
}

// zorder is a listing order: by score (descending when rev), then slot,
// then id (in the direction of the score, as Redis orders equal scores).
type zorder struct{ rev bool }

func (o zorder) cmp(a, b zitem) int {
	if a.Score != b.Score {
		if (a.Score < b.Score) != o.rev {
			return -1
		}
		return 1
	}
	if a.Slot != b.Slot {
		return a.Slot - b.Slot
	}
	c := strings.Compare(a.ID, b.ID)
	if o.rev {
		c = -c
	}
	return c
}

func encodeZCursor(e zitem) string {
	raw := strconv.FormatFloat(e.Score, 'f', -1, 64) + ":" + strconv.Itoa(e.Slot) + ":" + e.ID
	return "z1." + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeZCursor(s string, slotAmount int) (zitem, error) {
	enc, ok := strings.CutPrefix(s, "z1.")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		return zitem{}, errBadCursor
	}
	parts := strings.SplitN(string(raw), ":", 3)
	if len(parts) != 3 {
		return zitem{}, errBadCursor
	}
	score, err1 := strconv.ParseFloat(parts[0], 64)
	slot, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || slot < 0 || slot >= slotAmount {
		return zitem{}, errBadCursor
	}
	return zitem{Slot: slot, ID: parts[2], Score: score}, nil
}

// listZ returns up to limit members of the per-slot sets key(slot), merged
// in order o, after the cursor (from the start when it is empty), and the
// cursor of the next page ("" when this one is the last). Each slot
// contributes at most limit members, found by rank: a cursor costs a
// ZCOUNT per slot (a ZRANK on its own slot), never a scan.
func (h *handler) listZ(ctx context.Context, t topic.Topic, key func(keyspace.Keys) string, o zorder, cursor string, limit int) ([]zitem, string, error) {
	keys := make([]string, t.SlotAmount())
	for s := range keys {
		keys[s] = key(keyspace.KeysFor(h.cfg.keyPrefix, t, s))
	}
	return h.listZKeys(ctx, keys, o, cursor, limit)
}

// listZKeys is listZ over the sets keys, one per slot by index.
func (h *handler) listZKeys(ctx context.Context, keys []string, o zorder, cursor string, limit int) ([]zitem, string, error) {
	n := len(keys)
	var cur *zitem
	if cursor != "" {
		c, err := decodeZCursor(cursor, n)
		if err != nil {
			return nil, "", err
		}
		cur = &c
	}
	start, err := h.startRanks(ctx, keys, o, cur)
	if err != nil {
		return nil, "", err
	}
	pipe := h.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, n)
	for s := range n {
		cmds[s] = pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: keys[s], Start: start[s], Stop: start[s] + int64(limit), Rev: o.rev})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", err
	}
	var all []zitem
	for s, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			all = append(all, zitem{Slot: s, ID: id, Score: z.Score})
		}
	}
	slices.SortFunc(all, o.cmp)
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit]
	return page, encodeZCursor(page[limit-1]), nil
}

// startRanks returns, per slot, the rank (in order o) of the first member
// after the cursor.
func (h *handler) startRanks(ctx context.Context, keys []string, o zorder, cur *zitem) ([]int64, error) {
	start := make([]int64, len(keys))
	if cur == nil {
		return start, nil
	}
	s := strconv.FormatFloat(cur.Score, 'f', -1, 64)
	// Members that precede a score of s in order o: below it (ascending)
	// or above it (descending); "incl" counts equal scores too.
	before := func(pipe redis.Pipeliner, key string, incl bool) *redis.IntCmd {
		edge := "(" + s
		if incl {
			edge = s
		}
		if o.rev {
			return pipe.ZCount(ctx, key, edge, "+inf")
		}
		return pipe.ZCount(ctx, key, "-inf", edge)
	}
	pipe := h.rdb.Pipeline()
	counts := make([]*redis.IntCmd, len(keys))
	for slot, key := range keys {
		// Equal scores of lower slots come first, of higher slots after.
		counts[slot] = before(pipe, key, slot < cur.Slot)
	}
	score := pipe.ZScore(ctx, keys[cur.Slot], cur.ID)
	var rank *redis.IntCmd
	if o.rev {
		rank = pipe.ZRevRank(ctx, keys[cur.Slot], cur.ID)
	} else {
		rank = pipe.ZRank(ctx, keys[cur.Slot], cur.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for slot, c := range counts {
		start[slot] = c.Val()
	}
	if score.Err() == nil && score.Val() == cur.Score && rank.Err() == nil {
		start[cur.Slot] = rank.Val() + 1
		return start, nil
	}
	// The cursor's member is gone (delivered, removed): binary search the
	// members of equal score for the first that sorts after its id.
	key := keys[cur.Slot]
	ties, err := h.rdb.ZCount(ctx, key, s, s).Result()
	if err != nil {
		return nil, err
	}
	lo, hi := start[cur.Slot], start[cur.Slot]+ties
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := h.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: key, Start: mid, Stop: mid, Rev: o.rev}).Result()
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			hi = mid
			continue
		}
		if c := strings.Compare(m[0], cur.ID); (c <= 0) != o.rev || c == 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	start[cur.Slot] = lo
	return start, nil
}

// waitingItem is a waiting message in a listing.
type waitingItem struct {
	zitem
	Due      time.Time // time-based topics
	Priority int64     // priority topics: the store score
}

// waiting lists waiting messages in delivery order: earliest due first,
// or highest priority first.
func (h *handler) waiting(ctx context.Context, t topic.Topic, cursor string, limit int) ([]waitingItem, string, error) {
	timeBased := t.Type().TimeBased()
	items, next, err := h.listZ(ctx, t, func(k keyspace.Keys) string { return k.Store }, zorder{rev: !timeBased}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]waitingItem, len(items))
	for j, it := range items {
		out[j] = waitingItem{zitem: it}
		if timeBased {
			out[j].Due = time.UnixMilli(int64(it.Score))
		} else {
			out[j].Priority = int64(it.Score)
		}
	}
	return out, next, nil
}

// delayedItems lists the messages of a priority topic that wait for their
// time (a delay, or a retry's backoff), the earliest first.
func (h *handler) delayedItems(ctx context.Context, t topic.Topic, cursor string, limit int) ([]waitingItem, string, error) {
	items, next, err := h.listZ(ctx, t, func(k keyspace.Keys) string { return k.Delayed }, zorder{}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]waitingItem, len(items))
	for j, it := range items {
		out[j] = waitingItem{zitem: it, Due: time.UnixMilli(int64(it.Score))}
	}
	return out, next, nil
}

// inFlightItem is a delivery in flight.
type inFlightItem struct {
	zitem
	Lease   time.Time
	Attempt int
}

// inFlight lists deliveries in flight, the earliest lease deadline first.
func (h *handler) inFlight(ctx context.Context, t topic.Topic, cursor string, limit int) ([]inFlightItem, string, error) {
	items, next, err := h.listZ(ctx, t, func(k keyspace.Keys) string { return k.Prepare }, zorder{}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]inFlightItem, len(items))
	for j, it := range items {
		lease, attempt := splitPrepareScore(it.Score)
		out[j] = inFlightItem{zitem: it, Lease: lease, Attempt: attempt}
	}
	return out, next, nil
}

// dueBucket is one bar of the due-time histogram: waiting messages due in
// [From, To) relative to now.
type dueBucket struct {
	Label string
	Count int64
	// Overdue is true for buckets in the past: how late messages that are
	// due but not delivered yet already are.
	Overdue bool
}

// dueEdges are the bucket edges of the due-time histogram, relative to now.
var dueEdges = []struct {
	label string
	to    time.Duration // upper edge; the lower is the previous one's
}{
	{"> 1 h late", -time.Hour},
	{"1 m – 1 h late", -time.Minute},
	{"10 s – 1 m late", -10 * time.Second},
	{"1 – 10 s late", -time.Second},
	{"< 1 s late", 0},
	{"next minute", time.Minute},
	{"1 – 10 min", 10 * time.Minute},
	{"10 min – 1 h", time.Hour},
	{"1 – 6 h", 6 * time.Hour},
	{"6 – 24 h", 24 * time.Hour},
	{"1 – 7 days", 7 * 24 * time.Hour},
	{"later", 0}, // open-ended
}

// dueHistogram counts t's waiting messages by when they come due: one
// ZCOUNT per bucket and slot. Only time-based topics have due times.
func (h *handler) dueHistogram(ctx context.Context, t topic.Topic, now time.Time) ([]dueBucket, error) {
	if !t.Type().TimeBased() {
		return nil, nil
	}
	nowMs := now.UnixMilli()
	lower := "-inf"
	type bucket struct{ min, max string }
	bs := make([]bucket, len(dueEdges))
	for j, e := range dueEdges {
		upper := "+inf"
		if j < len(dueEdges)-1 {
			upper = "(" + strconv.FormatInt(nowMs+e.to.Milliseconds(), 10)
		}
		bs[j] = bucket{lower, upper}
		lower = strings.TrimPrefix(upper, "(")
	}
	pipe := h.rdb.Pipeline()
	cmds := make([][]*redis.IntCmd, t.SlotAmount())
	for s := range cmds {
		key := keyspace.KeysFor(h.cfg.keyPrefix, t, s).Store
		for _, b := range bs {
			cmds[s] = append(cmds[s], pipe.ZCount(ctx, key, b.min, b.max))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("due histogram of %s: %w", t.Name(), err)
	}
	out := make([]dueBucket, len(dueEdges))
	for j, e := range dueEdges {
		out[j] = dueBucket{Label: e.label, Overdue: e.to <= 0 && j < len(dueEdges)-1}
		for s := range cmds {
			out[j].Count += cmds[s][j].Val()
		}
	}
	return out, nil
}

// splitPrepareScore reads a prepare score as the scripts write it: the
// lease deadline, and the delivery token whose last three digits are the
// attempt.
func splitPrepareScore(score float64) (lease time.Time, attempt int) {
	sec, token := scripts.SplitPrepareScore(score)
	return time.Unix(sec, 0), int(token % 1000)
}
