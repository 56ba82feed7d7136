package inspect

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// DeadMessage is rmq.DeadMessage as this package makes it; rmq converts it.
type DeadMessage struct {
	ID    string
	Topic string
	Slot  int
	Body  []byte
	// Attempts is how many deliveries failed; the last moved it here.
	Attempts  int
	LastError string
	// FirstSentAt is the Redis time of the message's first send.
	FirstSentAt time.Time
	// DiedAt is when it moved to the dead queue (Redis's clock).
	DiedAt time.Time
	// DueAt is the due time a time-based message was sent with (zero for
	// priority topics).
	DueAt time.Time
	// Priority is the priority a priority message was sent with; Requeue
	// restores it (zero for time-based topics).
	Priority int64
	// Score is the dead score, the time of death in ms, which a cursor
	// holds exactly (DiedAt is rounded to the ms).
	Score float64
}

// Cursor returns the cursor of a listing that continues after m
// (rmq.DeadMessage.Cursor says what it holds).
func (m DeadMessage) Cursor() string {
	score := m.Score
	if score == 0 {
		score = float64(m.DiedAt.UnixMilli())
	}
	return encodeCursor(score, m.Slot, m.ID)
}

const cursorVersion = "d1"

func encodeCursor(score float64, slot int, id string) string {
	raw := strconv.FormatFloat(score, 'f', -1, 64) + ":" + strconv.Itoa(slot) + ":" + id
	return cursorVersion + "." + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

type cursor struct {
	score float64
	slot  int
	id    string
}

func decodeCursor(s string, slotAmount int) (cursor, error) {
	bad := func(why string) (cursor, error) {
		return cursor{}, fmt.Errorf("%w: %q: %s", ErrInvalidCursor, s, why)
	}
	v, enc, ok := strings.Cut(s, ".")
	if !ok || v != cursorVersion {
		return bad("unknown format")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return bad("not base64")
	}
	parts := strings.SplitN(string(raw), ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return bad("malformed")
	}
	score, err := strconv.ParseFloat(parts[0], 64)
	if err != nil {
		return bad("bad time")
	}
	slot, err := strconv.Atoi(parts[1])
	if err != nil || slot < 0 || slot >= slotAmount {
		return bad("slot out of range for this topic")
	}
	return cursor{score: score, slot: slot, id: parts[2]}, nil
}

// Dead is the work of rmq.Inspector.Dead, whose doc says what it does.
func (i *Inspector) Dead(ctx context.Context, t topic.Topic, cfg ListConfig) ([]DeadMessage, error) {
	if err := checkLimit(cfg.Limit); err != nil {
		return nil, err
	}
	if err := i.check(ctx, t); err != nil {
		return nil, err
	}
	var cur *cursor
	if cfg.Cursor != "" {
		c, err := decodeCursor(cfg.Cursor, t.SlotAmount())
		if err != nil {
			return nil, err
		}
		cur = &c
	}
	srcs, err := i.deadSources(ctx, t, cur)
	if err != nil {
		return nil, fmt.Errorf("rmq: list dead of %s: %w", t.Name(), err)
	}
	page, err := i.mergePage(ctx, srcs, listOrder{rev: true}, cfg.Limit)
	if err != nil {
		return nil, fmt.Errorf("rmq: list dead of %s: %w", t.Name(), err)
	}
	out, err := i.loadDead(ctx, t, page)
	if err != nil {
		return nil, fmt.Errorf("rmq: list dead of %s: %w", t.Name(), err)
	}
	return out, nil
}

// deadSources returns, per slot, the rank range of the dead set that lies
// after the cursor (everything without one).
func (i *Inspector) deadSources(ctx context.Context, t topic.Topic, cur *cursor) ([]zsource, error) {
	n := t.SlotAmount()
	srcs := make([]zsource, n)
	cards := make([]*redis.IntCmd, n)
	before := make([]*redis.IntCmd, n)
	var above, ties *redis.IntCmd
	var score *redis.FloatCmd
	var rank *redis.IntCmd
	var s string
	if cur != nil {
		s = strconv.FormatFloat(cur.score, 'f', -1, 64)
	}
	err := i.pipelined(ctx, n, func(pipe redis.Pipeliner, slot int) {
		key := i.keys(t, slot).Dead
		srcs[slot] = zsource{slot: slot, key: key}
		cards[slot] = pipe.ZCard(ctx, key)
		switch {
		case cur == nil:
		case slot < cur.slot: // equal deaths of lower slots come first
			before[slot] = pipe.ZCount(ctx, key, s, "+inf")
		case slot > cur.slot:
			before[slot] = pipe.ZCount(ctx, key, "("+s, "+inf")
		default:
			above = pipe.ZCount(ctx, key, "("+s, "+inf")
			ties = pipe.ZCount(ctx, key, s, s)
			score = pipe.ZScore(ctx, key, cur.id)
			rank = pipe.ZRevRank(ctx, key, cur.id)
		}
	})
	if err != nil {
		return nil, err
	}
	for slot := range srcs {
		srcs[slot].end = cards[slot].Val()
		if before[slot] != nil {
			srcs[slot].start = before[slot].Val()
		}
	}
	if cur == nil {
		return srcs, nil
	}
	c := &srcs[cur.slot]
	if score.Err() == nil && score.Val() == cur.score && rank.Err() == nil {
		c.start = rank.Val() + 1
		return srcs, nil
	}
	// The cursor's message is gone: find the first entry of equal death
	// whose id sorts below it (ids descend within equal deaths).
	lo, hi := above.Val(), above.Val()+ties.Val()
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := i.rdb.ZRevRange(ctx, c.key, mid, mid).Result()
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			hi = mid
			continue
		}
		if m[0] >= cur.id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	c.start = lo
	return srcs, nil
}

// loadDead reads the bodies of listed dead entries; entries requeued or
// deleted since they were listed are left out.
func (i *Inspector) loadDead(ctx context.Context, t topic.Topic, page []zentry) ([]DeadMessage, error) {
	bodies := make([]*redis.StringCmd, len(page))
	err := i.pipelined(ctx, len(page), func(pipe redis.Pipeliner, j int) {
		bodies[j] = pipe.HGet(ctx, i.keys(t, page[j].slot).DeadMsg, page[j].id)
	})
	if err != nil {
		return nil, err
	}
	out := make([]DeadMessage, 0, len(page))
	for j, e := range page {
		raw, err := bodies[j].Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		m, err := deadMessage(t, e, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func deadMessage(t topic.Topic, e zentry, raw []byte) (DeadMessage, error) {
	env, err := scripts.DecodeEnvelope(raw)
	if err != nil {
		return DeadMessage{}, fmt.Errorf("dead message %s in slot %d: %w", e.id, e.slot, err)
	}
	m := DeadMessage{
		ID:          e.id,
		Topic:       t.Name(),
		Slot:        e.slot,
		Body:        env.Body,
		Attempts:    env.Failures,
		LastError:   env.LastError,
		FirstSentAt: time.UnixMilli(int64(env.FirstSentMs)),
		DiedAt:      time.UnixMilli(int64(e.score)),
		Score:       e.score,
	}
	if t.Type().TimeBased() {
		m.DueAt = time.UnixMilli(int64(env.OrigScore))
	} else {
		m.Priority = int64(env.OrigScore)
	}
	return m, nil
}

// DeadMessage is the work of rmq.Inspector.DeadMessage, whose doc says what it does.
func (i *Inspector) DeadMessage(ctx context.Context, t topic.Topic, id string) (DeadMessage, error) {
	if err := i.check(ctx, t); err != nil {
		return DeadMessage{}, err
	}
	if id == "" {
		return DeadMessage{}, fmt.Errorf("%w: empty id", ErrMessageNotFound)
	}
	found, err := i.locateDead(ctx, t, []string{id})
	if err != nil {
		return DeadMessage{}, fmt.Errorf("rmq: find dead %s of %s: %w", id, t.Name(), err)
	}
	var page []zentry
	for slot, hits := range found {
		for _, h := range hits {
			page = append(page, zentry{slot: slot, id: h.id, score: h.score})
		}
	}
	newest := listOrder{rev: true}
	var best *zentry
	for j := range page {
		if best == nil || newest.before(page[j], *best) {
			best = &page[j]
		}
	}
	if best == nil {
		return DeadMessage{}, fmt.Errorf("%w: no dead message %q in %s", ErrMessageNotFound, id, t.Name())
	}
	out, err := i.loadDead(ctx, t, []zentry{*best})
	if err != nil {
		return DeadMessage{}, fmt.Errorf("rmq: read dead %s of %s: %w", id, t.Name(), err)
	}
	if len(out) == 0 {
		return DeadMessage{}, fmt.Errorf("%w: no dead message %q in %s", ErrMessageNotFound, id, t.Name())
	}
	return out[0], nil
}

type deadHit struct {
	id    string
	score float64
}

// locateChunk bounds the ids of one ZMSCORE.
const locateChunk = 1000

// locateDead finds in which slots the ids are dead: one ZMSCORE per slot
// and chunk of ids, pipelined. A message's slot comes from its slot basis,
// which only its producer knew, so every slot is asked.
func (i *Inspector) locateDead(ctx context.Context, t topic.Topic, ids []string) (map[int][]deadHit, error) {
	type call struct {
		slot int
		ids  []string
		cmd  *redis.Cmd
	}
	var calls []*call
	for slot := range t.SlotAmount() {
		for from := 0; from < len(ids); from += locateChunk {
			calls = append(calls, &call{slot: slot, ids: ids[from:min(len(ids), from+locateChunk)]})
		}
	}
	err := i.pipelined(ctx, len(calls), func(pipe redis.Pipeliner, j int) {
		c := calls[j]
		args := make([]any, 0, 2+len(c.ids))
		args = append(args, "ZMSCORE", i.keys(t, c.slot).Dead)
		for _, id := range c.ids {
			args = append(args, id)
		}
		c.cmd = pipe.Do(ctx, args...)
	})
	if err != nil {
		return nil, err
	}
	out := map[int][]deadHit{}
	for _, c := range calls {
		vals, err := c.cmd.Slice()
		if err != nil {
			return nil, err
		}
		for k, v := range vals {
			if v == nil || k >= len(c.ids) {
				continue
			}
			var score float64
			switch x := v.(type) {
			case string:
				score, _ = strconv.ParseFloat(x, 64)
			case float64:
				score = x
			case int64:
				score = float64(x)
			}
			out[c.slot] = append(out[c.slot], deadHit{id: c.ids[k], score: score})
		}
	}
	return out, nil
}
