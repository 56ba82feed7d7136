package luascripts_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/rmq-go/rmq/luascripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// TestFetchMergesSlotsInConsumeOrder fills several slots at random (equal
// scores, messages not yet due, ids blocked by their own delivery), fetches
// from all of them in one call with small windows and per-slot limits, and
// compares with the order computed here from what Redis holds: the best
// messages across slots, none skipped, each slot's limit kept, and every
// slot's new head reported.
func TestFetchMergesSlotsInConsumeOrder(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	for _, typ := range []int{2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			const nslots = 4
			tp := topic.MustNew("m", topic.Type(typ), nslots)
			prefix := redistest.Prefix(t)
			ks := make([]slots.Keys, nslots)
			for i := range ks {
				ks[i] = slots.KeysFor(prefix, tp, i)
			}
			rng := rand.New(rand.NewPCG(uint64(typ), 7))
			for trial := range 60 {
				for _, k := range ks {
					require.NoError(t, rdb.Del(ctx, k.Store, k.Prepare, k.Msg).Err())
				}
				// All slots filled by one multi-slot sendbatch call.
				now := time.Now().UnixMilli()
				sendKeys := []string{}
				head := []any{""}
				var quads []any
				for i, k := range ks {
					sendKeys = append(sendKeys, k.Store, k.Prepare, k.Msg, k.Wake)
					count := rng.IntN(10)
					head = append(head, typ, count)
					for j := range count {
						score := float64(17 + rng.IntN(4))
						if typ == 3 {
							score = float64(now - 1000 - int64(rng.IntN(4)))
							if rng.IntN(6) == 0 {
								score = float64(now + 3600_000) // not due
							}
						}
						id := fmt.Sprintf("s%d-%d", i, j)
						quads = append(quads, id, strconv.FormatFloat(score, 'f', -1, 64), strconv.Itoa(trial*100+j+1), "body-"+id)
					}
				}
				sent, err := luascripts.SendBatch.Run(ctx, rdb, sendKeys, append(head, quads...)...).Int64Slice()
				require.NoError(t, err)
				require.Len(t, sent, len(quads)/4)
				for _, r := range sent {
					require.EqualValues(t, 1, r)
				}
				for i, k := range ks {
					n, err := rdb.ZCard(ctx, k.Store).Result()
					require.NoError(t, err)
					require.EqualValues(t, head[2+2*i], n, "slot %d holds its own messages", i)
					// Some ids are being handled (a re-send waits in store).
					ids, err := rdb.ZRange(ctx, k.Store, 0, -1).Result()
					require.NoError(t, err)
					for _, id := range ids {
						require.Contains(t, id, fmt.Sprintf("s%d-", i))
						if rng.IntN(4) == 0 {
							require.NoError(t, rdb.ZAdd(ctx, k.Prepare, redis.Z{Score: 9e15, Member: id}).Err())
						}
					}
				}
				call := luascripts.FetchCall{TimeBased: typ != 2, N: 1 + rng.IntN(12), LeaseSec: 30, Window: 1 + rng.IntN(4)}
				for _, k := range ks {
					call.Groups = append(call.Groups, luascripts.FetchGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: rng.IntN(6)})
				}
				want, wantHeads := expectFetch(t, rdb, call)

				keys, args := call.Args()
				vals, err := luascripts.Fetch.Run(ctx, rdb, keys, args...).Slice()
				require.NoError(t, err)
				r, err := luascripts.ParseFetchReply(vals)
				require.NoError(t, err)
				var got []string
				for _, m := range r.Msgs {
					got = append(got, fmt.Sprintf("%d:%s", m.Group, m.ID))
					env, err := luascripts.DecodeEnvelope([]byte(m.Envelope))
					require.NoError(t, err)
					require.Equal(t, "body-"+m.ID, string(env.Body))
					in, err := rdb.ZScore(ctx, call.Groups[m.Group].Prepare, m.ID).Result()
					require.NoError(t, err, "%s is in prepare", m.ID)
					_, tok := luascripts.SplitPrepareScore(in)
					require.Equal(t, m.Token, tok)
				}
				require.Equal(t, want, got, "trial %d: %+v", trial, call)
				require.Equal(t, wantHeads, r.Heads, "trial %d: heads", trial)

				// One ack call for every slot: each delivery acked once, a
				// repeated pair and a stale token refused.
				ackKeys := []string{}
				ackArgs := []any{"PUBLISH"}
				var pairs []any
				var wantRes []int64
				for g, k := range ks {
					ackKeys = append(ackKeys, k.Store, k.Prepare, k.Msg, k.Wake)
					n := 0
					for _, m := range r.Msgs {
						if m.Group != g {
							continue
						}
						pairs = append(pairs, m.ID, m.Token)
						wantRes = append(wantRes, 1)
						n++
						if rng.IntN(3) == 0 {
							pairs = append(pairs, m.ID, m.Token) // again: refused
							wantRes = append(wantRes, 0)
							n++
						}
					}
					if g == 1 {
						pairs = append(pairs, "s1-0", 999999) // never delivered so
						wantRes = append(wantRes, 0)
						n++
					}
					ackArgs = append(ackArgs, n)
				}
				res, err := luascripts.Ack.Run(ctx, rdb, ackKeys, append(ackArgs, pairs...)...).Int64Slice()
				require.NoError(t, err)
				require.Equal(t, wantRes, res, "trial %d: ack results", trial)
				for _, m := range r.Msgs {
					k := ks[m.Group]
					require.Equal(t, redis.Nil, rdb.ZScore(ctx, k.Prepare, m.ID).Err(), "%s acked", m.ID)
					require.Equal(t, redis.Nil, rdb.HGet(ctx, k.Msg, m.ID).Err(), "%s's body deleted", m.ID)
				}
			}
		})
	}
}

// expectFetch computes what fetch.lua must take, from Redis's state before
// the call, and each slot's head after it.
func expectFetch(t *testing.T, rdb *redis.Client, call luascripts.FetchCall) (want []string, heads []float64) {
	ctx := context.Background()
	type entry struct {
		group, pos int
		id         string
		score      float64
	}
	var all []entry
	perGroup := make([][]redis.Z, len(call.Groups))
	blocked := make([]map[string]bool, len(call.Groups))
	now := float64(time.Now().UnixMilli())
	for g, grp := range call.Groups {
		zs, err := rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: grp.Store, Start: 0, Stop: -1, Rev: !call.TimeBased}).Result()
		require.NoError(t, err)
		perGroup[g] = zs
		blocked[g] = map[string]bool{}
		for pos, z := range zs {
			id := z.Member.(string)
			if rdb.ZScore(ctx, grp.Prepare, id).Err() == nil {
				blocked[g][id] = true
				continue
			}
			if call.TimeBased && z.Score > now {
				continue
			}
			all = append(all, entry{g, pos, id, z.Score})
		}
	}
	slices.SortStableFunc(all, func(a, b entry) int {
		if a.score != b.score {
			if call.TimeBased {
				return cmp.Compare(a.score, b.score)
			}
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.pos, b.pos))
	})
	taken := make([]int, len(call.Groups))
	gone := map[string]bool{}
	for _, e := range all {
		if len(want) == call.N {
			break
		}
		if taken[e.group] < call.Groups[e.group].Max {
			taken[e.group]++
			want = append(want, fmt.Sprintf("%d:%s", e.group, e.id))
			gone[want[len(want)-1]] = true
		}
	}
	for g, zs := range perGroup {
		head := -1.0
		looked := 0
		for _, z := range zs {
			id := z.Member.(string)
			if gone[fmt.Sprintf("%d:%s", g, id)] {
				continue
			}
			if looked++; looked > 64 {
				break
			}
			if !blocked[g][id] {
				head = z.Score
				break
			}
			head = -2
		}
		heads = append(heads, head)
	}
	return want, heads
}
