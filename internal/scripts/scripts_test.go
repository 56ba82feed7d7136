package scripts_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/luascripts"
	"github.com/rmq-go/rmq/topic"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// slot drives the scripts of one topic slot directly, the way the producer
// and consumer do, so each invariant is checked at the level it lives at.
type slot struct {
	t     *testing.T
	ctx   context.Context
	rdb   *redis.Client
	k     keyspace.Keys
	typ   int // 1 range-merge, 2 priority, 3 fixed-time
	nonce int
}

type delivered struct {
	id    string
	env   scripts.Envelope
	token int64
	score float64
	group int // index of the slot group in a multi-slot fetch
}

func newSlot(t *testing.T, typ int) *slot {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	tp := topic.MustNew("t", topic.Type(typ), 1)
	return &slot{t: t, ctx: context.Background(), rdb: rdb, k: keyspace.KeysFor(redistest.Prefix(t), tp, 0), typ: typ}
}

func (s *slot) sendNonce(id string, score float64, body, nonce string) int64 {
	s.t.Helper()
	n, err := scripts.SendBatch.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed},
		"PUBLISH", s.typ, 1, id, strconv.FormatFloat(score, 'f', -1, 64), nonce, body).Int64Slice()
	require.NoError(s.t, err)
	require.Len(s.t, n, 1)
	return n[0]
}

// sendAll stores several messages in one sendbatch.lua call, as a flush of
// the producer does, and returns one result each.
func (s *slot) sendAll(ids []string, scores []float64, bodies []string) []int64 {
	s.t.Helper()
	args := []any{"PUBLISH", s.typ, len(ids)}
	for i, id := range ids {
		s.nonce++
		args = append(args, id, strconv.FormatFloat(scores[i], 'f', -1, 64), strconv.Itoa(s.nonce), bodies[i])
	}
	n, err := scripts.SendBatch.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed}, args...).Int64Slice()
	require.NoError(s.t, err)
	require.Len(s.t, n, len(ids))
	return n
}

// ackAll acks several deliveries in one ack.lua call, as the acker does.
func (s *slot) ackAll(ids []string, tokens []int64) []int64 {
	s.t.Helper()
	args := []any{"PUBLISH", len(ids)}
	for i, id := range ids {
		args = append(args, id, tokens[i])
	}
	res, err := scripts.Ack.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed, s.k.Dead}, args...).Int64Slice()
	require.NoError(s.t, err)
	require.Len(s.t, res, len(ids))
	return res
}

func (s *slot) send(id string, score float64, body string) int64 {
	s.nonce++
	return s.sendNonce(id, score, body, strconv.Itoa(s.nonce))
}

func (s *slot) fetch(n, leaseSec int) (head float64, out []delivered) {
	s.t.Helper()
	return s.fetchWindow(n, leaseSec, n+64)
}

// fetchWindow fetches reading window store entries at a time.
func (s *slot) fetchWindow(n, leaseSec, window int) (head float64, out []delivered) {
	s.t.Helper()
	r := s.fetchGroups(scripts.FetchCall{N: n, LeaseSec: int64(leaseSec), Window: window,
		Groups: []scripts.FetchGroup{{Store: s.k.Store, Prepare: s.k.Prepare, Msg: s.k.Msg, Max: n}}})
	return r.Heads[0], deliveries(s.t, r)
}

func (s *slot) fetchGroups(call scripts.FetchCall) scripts.FetchReply {
	s.t.Helper()
	call.TimeBased = s.typ != 2
	keys, args := call.Args()
	vals, err := scripts.Fetch.Run(s.ctx, s.rdb, keys, args...).Slice()
	require.NoError(s.t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(s.t, err)
	require.Len(s.t, r.Heads, len(call.Groups))
	return r
}

func deliveries(t *testing.T, r scripts.FetchReply) []delivered {
	t.Helper()
	var out []delivered
	for _, m := range r.Msgs {
		env, err := scripts.DecodeEnvelope([]byte(m.Envelope))
		require.NoError(t, err)
		out = append(out, delivered{id: m.ID, env: env, token: m.Token, score: m.Score, group: m.Group})
	}
	return out
}

func (s *slot) ack(id string, token int64) int64 {
	s.t.Helper()
	res, err := scripts.Ack.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed, s.k.Dead}, "PUBLISH", 1, id, token).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

func (s *slot) rollbackArgs(maxRetries int, backoffMs int64, deadMax int) []any {
	return []any{"PUBLISH", maxRetries, deadMax, 0, 1, backoffMs}
}

func (s *slot) rollback(maxRetries int, id string, token int64, errText string) int64 {
	s.t.Helper()
	args := append(s.rollbackArgs(maxRetries, 0, 0), id, token, errText, "")
	res, err := scripts.Rollback.Run(s.ctx, s.rdb, s.allKeys(), args...).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

func (s *slot) sweep(maxRetries int) (rolled int64) {
	s.t.Helper()
	vals, err := scripts.Sweep.Run(s.ctx, s.rdb, s.allKeys(), "PUBLISH", maxRetries, 0, 0, 1000, 1, 0).Slice()
	require.NoError(s.t, err)
	return vals[0].(int64)
}

func (s *slot) extend(leaseSec int, id string, token int64) int64 {
	s.t.Helper()
	res, err := scripts.Extend.Run(s.ctx, s.rdb, []string{s.k.Prepare}, leaseSec, id, token).Int64Slice()
	require.NoError(s.t, err)
	return res[0]
}

func (s *slot) remove(id string) int64 {
	s.t.Helper()
	n, err := scripts.Remove.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Delayed}, id).Int64()
	require.NoError(s.t, err)
	return n
}

func (s *slot) allKeys() []string {
	return []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Dead, s.k.DeadMsg, s.k.Wake, s.k.Delayed}
}

// expire moves a delivery's lease deadline into the past, keeping its token,
// as if its consumer had died long ago.
func (s *slot) expire(id string) {
	s.t.Helper()
	score, err := s.rdb.ZScore(s.ctx, s.k.Prepare, id).Result()
	require.NoError(s.t, err)
	_, token := scripts.SplitPrepareScore(score)
	past := float64((time.Now().Unix()-100)*scripts.TokenMod + token)
	require.NoError(s.t, s.rdb.ZAdd(s.ctx, s.k.Prepare, redis.Z{Score: past, Member: id}).Err())
}

// head is what fetch.lua must report as the head: the score of the first
// store entry in consume order whose id is not in prepare; -1 for an empty
// store, -2 when the first 64 are all in prepare.
func (s *slot) head() float64 {
	s.t.Helper()
	args := redis.ZRangeArgs{Key: s.k.Store, Start: 0, Stop: 63, Rev: s.typ == 2}
	zs, err := s.rdb.ZRangeArgsWithScores(s.ctx, args).Result()
	require.NoError(s.t, err)
	if len(zs) == 0 {
		return -1
	}
	for _, z := range zs {
		err := s.rdb.ZScore(s.ctx, s.k.Prepare, z.Member.(string)).Err()
		if err == redis.Nil {
			return z.Score
		}
		require.NoError(s.t, err)
	}
	return -2
}

type where struct{ store, prepare, dead, msg, deadmsg, delayed bool }

func (s *slot) where(id string) where {
	s.t.Helper()
	in := func(key string) bool {
		err := s.rdb.ZScore(s.ctx, key, id).Err()
		if err == redis.Nil {
			return false
		}
		require.NoError(s.t, err)
		return true
	}
	has := func(key string) bool {
		ok, err := s.rdb.HExists(s.ctx, key, id).Result()
		require.NoError(s.t, err)
		return ok
	}
	return where{in(s.k.Store), in(s.k.Prepare), in(s.k.Dead), has(s.k.Msg), has(s.k.DeadMsg), in(s.k.Delayed)}
}

func (s *slot) envelope(key, id string) scripts.Envelope {
	s.t.Helper()
	raw, err := s.rdb.HGet(s.ctx, key, id).Bytes()
	require.NoError(s.t, err)
	e, err := scripts.DecodeEnvelope(raw)
	require.NoError(s.t, err)
	return e
}

func past() float64 { return float64(time.Now().Add(-time.Second).UnixMilli()) }

func future() int64 { return time.Now().Add(time.Hour).UnixMilli() }

// TestScriptHeaders checks that every script names each KEYS and ARGV it
// uses in its header, and that the header lists exactly the KEYS used.
func TestScriptHeaders(t *testing.T) {
	keyUse := regexp.MustCompile(`KEYS\[(\d+)\]`)
	keyDoc := regexp.MustCompile(`(?m)^-- KEYS\[(\d+)\] ->`)
	groupKeyUse := regexp.MustCompile(`KEYS\[(\d+) \* g(?: - (\d+))?\]`)
	// KEYS[b + 2] and KEYS[kb[g] + 2]: group 1's KEYS[2] where groups take
	// keys of their own number.
	baseKeyUse := regexp.MustCompile(`KEYS\[(?:b|kb\[g\]) \+ (\d+)\]`)
	for _, name := range scripts.Names() {
		src, err := luascripts.Source(name)
		require.NoError(t, err)
		// The header is the leading block of comment lines.
		lines := strings.Split(src, "\n")
		n := 0
		for n < len(lines) && strings.HasPrefix(lines[n], "--") {
			n++
		}
		header, body := strings.Join(lines[:n], "\n"), strings.Join(lines[n:], "\n")
		assert.Contains(t, header, "Returns:", name)
		assert.Contains(t, header, "ARGV[1] ->", name)
		documented := map[string]bool{}
		for _, m := range keyDoc.FindAllStringSubmatch(header, -1) {
			documented[m[1]] = true
		}
		used := map[string]bool{}
		for _, m := range keyUse.FindAllStringSubmatch(body, -1) {
			used[m[1]] = true
		}
		// KEYS[3 * g - 2] in a multi-group script is group 1's KEYS[1].
		for _, m := range groupKeyUse.FindAllStringSubmatch(body, -1) {
			k, _ := strconv.Atoi(m[1])
			j, _ := strconv.Atoi(m[2])
			used[strconv.Itoa(k-j)] = true
		}
		for _, m := range baseKeyUse.FindAllStringSubmatch(body, -1) {
			used[m[1]] = true
		}
		assert.Equal(t, documented, used, "%s: KEYS documented vs used", name)
		assert.NotRegexp(t, `redis\.call\('\w+', ARGV`, body, "%s builds a key from ARGV", name)
	}
}

// Invariant 2: a send that arrives while the same id is in prepare is stored
// again and delivered after the in-flight one; the ack of the in-flight one
// keeps the new body.
func TestResendDuringPrepareIsNotSwallowed(t *testing.T) {
	for _, typ := range []int{1, 2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newSlot(t, typ)
			score := past()
			if typ == 1 {
				score = 0 // range of 0 ms: due at once
			} else if typ == 2 {
				score = 100
			}
			require.EqualValues(t, 1, s.send("a", score, "v1"))
			_, got := s.fetch(10, 30)
			require.Len(t, got, 1)
			require.Equal(t, "v1", string(got[0].env.Body))

			require.EqualValues(t, 4, s.send("a", score, "v2"), "stored again while in flight")
			assert.Equal(t, where{store: true, prepare: true, msg: true}, s.where("a"))

			// The re-sent message waits for the in-flight one: not fetched now.
			head, again := s.fetch(10, 30)
			assert.Empty(t, again)
			assert.EqualValues(t, -2, head)

			require.EqualValues(t, 1, s.ack("a", got[0].token))
			assert.Equal(t, where{store: true, msg: true}, s.where("a"), "ack kept the re-sent message and its body")

			_, next := s.fetch(10, 30)
			require.Len(t, next, 1)
			assert.Equal(t, "v2", string(next[0].env.Body))
			assert.EqualValues(t, 1, next[0].token%1000, "a re-send starts at attempt 1")
			require.EqualValues(t, 1, s.ack("a", next[0].token))
			assert.Equal(t, where{}, s.where("a"))
		})
	}
}

// A rollback of the in-flight delivery while a re-send waits does not lose
// the re-send and does not count against it.
func TestRollbackWhileResendWaits(t *testing.T) {
	s := newSlot(t, 3)
	s.send("a", past(), "v1")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	s.send("a", past(), "v2")
	require.EqualValues(t, 2, s.rollback(0, "a", got[0].token, "boom"), "superseded, not dead")
	assert.Equal(t, where{store: true, msg: true}, s.where("a"))
	_, next := s.fetch(1, 30)
	require.Len(t, next, 1)
	assert.Equal(t, "v2", string(next[0].env.Body))
	assert.EqualValues(t, 1, next[0].token%1000)
}

// Invariant 3: once a lease expired and the message was redelivered, the
// first delivery's ack, rollback and extend change nothing.
func TestStaleAckAndRollbackAreInert(t *testing.T) {
	s := newSlot(t, 3)
	s.send("a", past(), "v1")
	_, first := s.fetch(1, 30)
	require.Len(t, first, 1)
	s.expire("a")
	require.EqualValues(t, 1, s.sweep(16))
	_, second := s.fetch(1, 30)
	require.Len(t, second, 1)
	assert.EqualValues(t, 2, second[0].token%1000, "the expired lease counted as an attempt")
	before, err := s.rdb.ZScore(s.ctx, s.k.Prepare, "a").Result()
	require.NoError(t, err)

	assert.EqualValues(t, 0, s.ack("a", first[0].token))
	assert.EqualValues(t, 0, s.rollback(16, "a", first[0].token, "stale"))
	assert.EqualValues(t, 0, s.extend(30, "a", first[0].token))

	after, err := s.rdb.ZScore(s.ctx, s.k.Prepare, "a").Result()
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Equal(t, where{prepare: true, msg: true}, s.where("a"))
	assert.Equal(t, "rmq: lease expired", s.envelope(s.k.Msg, "a").LastError, "the stale rollback wrote no error")
	assert.EqualValues(t, 1, s.ack("a", second[0].token))
	assert.Equal(t, where{}, s.where("a"))
}

// go-redis resends a script whose reply was lost: every script must be
// safe to run twice for one call.
func TestScriptsAreSafeToRunTwice(t *testing.T) {
	s := newSlot(t, 3)
	due := past()
	assert.EqualValues(t, 1, s.sendNonce("a", due, "v1", "77"))
	assert.EqualValues(t, 0, s.sendNonce("a", due, "v1", "77"), "the rerun recognises itself")
	n, err := s.rdb.ZCard(s.ctx, s.k.Store).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	// A rerun of a send whose first run was already fetched must not store
	// the message again.
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	assert.EqualValues(t, 0, s.sendNonce("a", due, "v1", "77"))
	assert.Equal(t, where{prepare: true, msg: true}, s.where("a"))

	assert.EqualValues(t, 4, s.rollback(16, "a", got[0].token, "boom"))
	assert.EqualValues(t, 0, s.rollback(16, "a", got[0].token, "boom"), "a rerun counts no second attempt")
	assert.Equal(t, 1, s.envelope(s.k.Msg, "a").Failures)

	_, got = s.fetch(1, 30)
	require.Len(t, got, 1)
	assert.EqualValues(t, 2, got[0].token%1000)
	assert.EqualValues(t, 1, s.extend(30, "a", got[0].token))
	assert.EqualValues(t, 1, s.extend(30, "a", got[0].token))
	assert.EqualValues(t, 1, s.ack("a", got[0].token))
	assert.EqualValues(t, 2, s.ack("a", got[0].token), "a rerun of an ack that succeeded reports the id gone")
	assert.Equal(t, where{}, s.where("a"))
	assert.EqualValues(t, 0, s.remove("a"))
}

// "Now" is Redis's clock: nothing is fetched before it is due by Redis,
// and the sweeper never takes a live lease.
func TestScriptsUseRedisClock(t *testing.T) {
	s := newSlot(t, 3)
	due := float64(time.Now().Add(3 * time.Second).UnixMilli())
	s.send("later", due, "x")
	head, got := s.fetch(10, 30)
	assert.Empty(t, got)
	assert.Equal(t, due, head)

	s.send("now", past(), "y")
	_, got = s.fetch(10, 5)
	require.Len(t, got, 1)
	assert.EqualValues(t, 0, s.sweep(16), "a live lease is not swept")
	assert.Equal(t, where{prepare: true, msg: true}, s.where("now"))
}

func TestFetchTakesAtMostNInOrder(t *testing.T) {
	s := newSlot(t, 3)
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := 99; i >= 0; i-- {
		s.send(fmt.Sprintf("m%02d", i), float64(base+int64(i)), "b")
	}
	_, got := s.fetch(10, 30)
	require.Len(t, got, 10)
	for i, d := range got {
		assert.Equal(t, fmt.Sprintf("m%02d", i), d.id)
		assert.Equal(t, float64(base+int64(i)), d.score)
	}
	n, _ := s.rdb.ZCard(s.ctx, s.k.Prepare).Result()
	assert.EqualValues(t, 10, n)
}

func TestPriorityRetryRanksBelowFresh(t *testing.T) {
	s := newSlot(t, 2)
	s.send("hi", 1000, "x")
	_, got := s.fetch(1, 30)
	require.Len(t, got, 1)
	require.EqualValues(t, 4, s.rollback(16, "hi", got[0].token, "boom"))
	score, err := s.rdb.ZScore(s.ctx, s.k.Store, "hi").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 15, score, "remaining retries")
	assert.EqualValues(t, 1000, s.envelope(s.k.Msg, "hi").OrigScore, "the original priority is kept")
	s.send("low", 17, "y")
	_, got = s.fetch(2, 30)
	require.Len(t, got, 2)
	assert.Equal(t, "low", got[0].id)
	assert.Equal(t, "hi", got[1].id)
}

func TestDeadAfterMaxRetriesWithRetention(t *testing.T) {
	s := newSlot(t, 3)
	for _, id := range []string{"a", "b", "c"} {
		s.send(id, past(), "body-"+id)
		for attempt := 1; attempt <= 2; attempt++ {
			_, got := s.fetch(1, 30)
			require.Len(t, got, 1)
			args := append(s.rollbackArgs(1, 0, 2), id, got[0].token, fmt.Sprintf("fail %d", attempt), "")
			res, err := scripts.Rollback.Run(s.ctx, s.rdb, s.allKeys(), args...).Int64Slice()
			require.NoError(t, err)
			want := int64(4)
			if attempt == 2 {
				want = 3
			}
			require.Equal(t, want, res[0])
		}
		s.sleepPast(s.redisNowMs()) // distinct death times
	}
	assert.Equal(t, where{}, s.where("a"), "retention dropped the oldest, body with it")
	assert.Equal(t, where{dead: true, deadmsg: true}, s.where("b"))
	e := s.envelope(s.k.DeadMsg, "c")
	assert.Equal(t, "fail 2", e.LastError)
	assert.Equal(t, 2, e.Failures)
	assert.Equal(t, "body-c", string(e.Body))
}
