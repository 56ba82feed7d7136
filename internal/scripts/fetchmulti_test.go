package scripts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// multiSection is one fetch of a multi-section call: a topic of its own
// with random contents, and the call that fetches from it.
type multiSection struct {
	typ     int  // 2 priority, 3 fixed-time
	delayed bool // priority with delayed sets looked at
	nslots  int
	msgs    [][]multiMsg // per slot
	blocked [][]string   // per slot: ids put in prepare beforehand
	call    scripts.FetchCall
	bad     bool // its first store key holds a string: the section fails
}

type multiMsg struct {
	id        string
	score     float64
	notBefore int64 // priority only: waits in the delayed set until then
}

// randomSections draws the sections of one trial; base is the trial's now.
func randomSections(rng *rand.Rand, base int64) []*multiSection {
	out := make([]*multiSection, 1+rng.IntN(6))
	for s := range out {
		sec := &multiSection{typ: 2 + rng.IntN(2), nslots: 1 << rng.IntN(3)}
		sec.delayed = sec.typ == 2 && rng.IntN(2) == 0
		for i := range sec.nslots {
			var ms []multiMsg
			var bl []string
			for j := range rng.IntN(9) {
				m := multiMsg{id: fmt.Sprintf("m%d-%d", i, j), score: float64(17 + rng.IntN(4))}
				if sec.typ == 3 {
					m.score = float64(base - 1000 - int64(rng.IntN(4)))
					if rng.IntN(6) == 0 {
						m.score = float64(base + 3600_000)
					}
				} else if rng.IntN(5) == 0 {
					m.notBefore = base - 500 // due: enters store when looked at
					if rng.IntN(2) == 0 {
						m.notBefore = base + 3600_000
					}
				}
				ms = append(ms, m)
				if rng.IntN(4) == 0 {
					bl = append(bl, m.id)
				}
			}
			sec.msgs = append(sec.msgs, ms)
			sec.blocked = append(sec.blocked, bl)
		}
		sec.call = scripts.FetchCall{TimeBased: sec.typ == 3, N: 1 + rng.IntN(12), LeaseSec: int64(10 + rng.IntN(50)), Window: 1 + rng.IntN(4)}
		if rng.IntN(4) == 0 {
			if sec.typ == 3 {
				sec.call.Bound = strconv.FormatInt(base-1000-int64(rng.IntN(4)), 10)
			} else {
				sec.call.Bound = strconv.Itoa(17 + rng.IntN(4))
			}
		}
		for range sec.nslots {
			sec.call.Groups = append(sec.call.Groups, scripts.FetchGroup{Max: rng.IntN(6), CheckDelayed: sec.delayed && rng.IntN(4) != 0})
		}
		sec.bad = rng.IntN(12) == 0
		out[s] = sec
	}
	return out
}

// populate stores the section's topic under prefix and fills its call's
// keys.
func (sec *multiSection) populate(t *testing.T, rdb *redis.Client, prefix string, s int) {
	ctx := context.Background()
	tp := topic.MustNew(fmt.Sprintf("sec%d", s), topic.Type(sec.typ), sec.nslots)
	nonce := 0
	for i := range sec.nslots {
		k := keyspace.KeysFor(prefix, tp, i)
		g := &sec.call.Groups[i]
		g.Store, g.Prepare, g.Msg, g.Delayed = k.Store, k.Prepare, k.Msg, ""
		if sec.delayed {
			g.Delayed = k.Delayed
		}
		for _, m := range sec.msgs[i] {
			nonce++
			typ, args := sec.typ, []any{m.id, strconv.FormatFloat(m.score, 'f', -1, 64), strconv.Itoa(nonce)}
			if m.notBefore != 0 {
				typ += 4
				args = append(args, scripts.EncodeOptions(scripts.Options{NotBeforeMs: m.notBefore}))
			}
			args = append(args, "body-"+m.id)
			res, err := scripts.SendBatch.Run(ctx, rdb, []string{k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed}, append([]any{"", typ, 1}, args...)...).Int64Slice()
			require.NoError(t, err)
			require.Equal(t, []int64{1}, res)
		}
		for _, id := range sec.blocked[i] {
			require.NoError(t, rdb.ZAdd(ctx, k.Prepare, redis.Z{Score: 9e15, Member: id}).Err())
		}
		if sec.bad && i == 0 {
			require.NoError(t, rdb.Del(ctx, k.Store).Err())
			require.NoError(t, rdb.Set(ctx, k.Store, "not a zset", 0).Err())
		}
	}
}

// multiOutcome is what a section's fetch did, with what differs between
// two runs by nature left out (Redis's clock, the tokens' salt, the lease
// deadlines): its reply and the state of its keys after.
type multiOutcome struct {
	err   string
	reply scripts.FetchReply
	state []string
}

func outcomeOf(t *testing.T, rdb *redis.Client, sec *multiSection, r scripts.FetchReply, err error, prefix string) multiOutcome {
	ctx := context.Background()
	var o multiOutcome
	if err != nil {
		o.err = err.Error()
	} else {
		for i := range r.Msgs {
			m := &r.Msgs[i]
			g := sec.call.Groups[m.Group]
			in, err := rdb.ZScore(ctx, g.Prepare, m.ID).Result()
			require.NoError(t, err, "%s is in prepare", m.ID)
			_, tok := scripts.SplitPrepareScore(in)
			require.Equal(t, m.Token, tok, "the token handed out is the one in prepare")
			m.Token %= 1000 // the attempt; the salt differs between runs
			env, err := scripts.DecodeEnvelope([]byte(m.Envelope))
			require.NoError(t, err)
			env.FirstSentMs = 0 // the time of populate
			m.Envelope = fmt.Sprintf("%+v", env)
		}
		r.NowUs = 0
		o.reply = r
	}
	for _, g := range sec.call.Groups {
		for _, key := range []string{g.Store, g.Prepare, g.Msg, strings.TrimSuffix(g.Store, "store") + "delayed"} {
			typ, err := rdb.Type(ctx, key).Result()
			require.NoError(t, err)
			line := strings.TrimPrefix(key, prefix) + " " + typ + ":"
			switch typ {
			case "zset":
				zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
				require.NoError(t, err)
				if strings.HasSuffix(key, ":prepare") {
					// Lease deadlines and tokens differ between runs, and
					// so their order.
					for i := range zs {
						if zs[i].Score != 9e15 {
							zs[i].Score = 1
						}
					}
					slices.SortFunc(zs, func(a, b redis.Z) int { return strings.Compare(a.Member.(string), b.Member.(string)) })
				}
				for _, z := range zs {
					line += fmt.Sprintf(" %v=%v", z.Member, z.Score)
				}
			case "hash":
				h, err := rdb.HGetAll(ctx, key).Result()
				require.NoError(t, err)
				line += fmt.Sprint(" ", len(h))
				for f, v := range h {
					env, err := scripts.DecodeEnvelope([]byte(v))
					require.NoError(t, err)
					require.Equal(t, "body-"+f, string(env.Body))
				}
			}
			o.state = append(o.state, line)
		}
	}
	return o
}

// TestMultiFetchEqualsSectionsAlone: a fetch.lua call carrying several
// sections (topics of both types, with and without delayed sets, bounds,
// blocked ids, small windows and limits, a section whose key has the wrong
// type) replies and writes, section by section, exactly what the same
// fetches called one by one on the same contents do.
func TestMultiFetchEqualsSectionsAlone(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, 1))
	prefix := redistest.Prefix(t)
	for trial := range 80 {
		base := time.Now().UnixMilli()
		secs := randomSections(rng, base)
		alone, merged := fmt.Sprintf("%s-a%d", prefix, trial), fmt.Sprintf("%s-m%d", prefix, trial)

		var want []multiOutcome
		for s, sec := range secs {
			sec.populate(t, rdb, alone, s)
		}
		for _, sec := range secs {
			keys, args := sec.call.Args()
			vals, err := scripts.Fetch.Run(ctx, rdb, keys, args...).Slice()
			var r scripts.FetchReply
			if err == nil {
				r, err = scripts.ParseFetchReply(vals)
				require.NoError(t, err)
			}
			want = append(want, outcomeOf(t, rdb, sec, r, err, alone))
		}

		calls := make([]scripts.FetchCall, len(secs))
		for s, sec := range secs {
			sec.populate(t, rdb, merged, s)
			calls[s] = sec.call
		}
		keys, args := scripts.MultiFetchArgs(calls)
		vals, err := scripts.Fetch.Run(ctx, rdb, keys, args...).Slice()
		require.NoError(t, err, "trial %d", trial)
		replies, errs, err := scripts.ParseMultiFetchReply(vals, len(secs))
		require.NoError(t, err)
		for s, sec := range secs {
			got := outcomeOf(t, rdb, sec, replies[s], errs[s], merged)
			if sec.bad {
				require.Error(t, errs[s], "trial %d section %d", trial, s)
				require.Contains(t, got.err, "WRONGTYPE")
				require.Contains(t, want[s].err, "WRONGTYPE")
				got.err = want[s].err
			}
			require.Equal(t, want[s], got, "trial %d section %d of %d: %+v", trial, s, len(secs), sec.call)
		}
	}
}

// A multi-section reply that does not have one entry per section is
// refused, as is a section reply that is not a fetch reply.
func TestParseMultiFetchReplyRefusesBadShapes(t *testing.T) {
	_, _, err := scripts.ParseMultiFetchReply([]any{[]any{int64(1), int64(0), int64(0), int64(0), int64(0), int64(0)}}, 2)
	require.Error(t, err)
	rs, errs, err := scripts.ParseMultiFetchReply([]any{[]any{int64(7), int64(0), int64(0), int64(0), int64(0), int64(0)}, "x", []any{int64(1)}}, 3)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.EqualValues(t, 7, rs[0].NowUs)
	require.Error(t, errs[1])
	require.Error(t, errs[2])
}
