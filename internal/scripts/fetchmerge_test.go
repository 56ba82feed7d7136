package scripts_test

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

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// TestFetchMergesSlotsInConsumeOrder fills several slots at random (equal
// scores, messages not yet due, ids blocked by their own delivery), fetches
// from all of them in one call with small windows and per-slot limits, and
// compares with the order computed here from what Redis holds: the best
// messages across slots (equal scores in any order between slots), none
// skipped, each slot's limit kept, and every slot's new head reported.
func TestFetchMergesSlotsInConsumeOrder(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	for _, typ := range []int{2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			const nslots = 4
			tp := topic.MustNew("m", topic.Type(typ), nslots)
			prefix := redistest.Prefix(t)
			ks := make([]keyspace.Keys, nslots)
			for i := range ks {
				ks[i] = keyspace.KeysFor(prefix, tp, i)
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
					sendKeys = append(sendKeys, k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed)
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
				sent, err := scripts.SendBatch.Run(ctx, rdb, sendKeys, append(head, quads...)...).Int64Slice()
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
				call := scripts.FetchCall{TimeBased: typ != 2, N: 1 + rng.IntN(12), LeaseSec: 30, Window: 1 + rng.IntN(4)}
				for _, k := range ks {
					call.Groups = append(call.Groups, scripts.FetchGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: rng.IntN(6)})
				}
				model := modelFetch(t, rdb, call)

				keys, args := call.Args()
				vals, err := scripts.Fetch.Run(ctx, rdb, keys, args...).Slice()
				require.NoError(t, err)
				r, err := scripts.ParseFetchReply(vals)
				require.NoError(t, err)
				for _, m := range r.Msgs {
					env, err := scripts.DecodeEnvelope([]byte(m.Envelope))
					require.NoError(t, err)
					require.Equal(t, "body-"+m.ID, string(env.Body))
					in, err := rdb.ZScore(ctx, call.Groups[m.Group].Prepare, m.ID).Result()
					require.NoError(t, err, "%s is in prepare", m.ID)
					_, tok := scripts.SplitPrepareScore(in)
					require.Equal(t, m.Token, tok)
				}
				model.check(t, r, trial)

				// One ack call for every slot: each delivery acked once, a
				// repeated pair and a stale token refused.
				ackKeys := []string{}
				ackArgs := []any{"PUBLISH"}
				var pairs []any
				var wantRes []int64
				for g, k := range ks {
					ackKeys = append(ackKeys, k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed, k.Dead)
					n := 0
					for _, m := range r.Msgs {
						if m.Group != g {
							continue
						}
						pairs = append(pairs, m.ID, m.Token)
						wantRes = append(wantRes, 1)
						n++
						if rng.IntN(3) == 0 {
							pairs = append(pairs, m.ID, m.Token) // again: gone, as a second call would see it
							wantRes = append(wantRes, 2)
							n++
						}
					}
					if g == 1 {
						pairs = append(pairs, "s1-0", 999999) // never delivered so
						// Refused; 2 (gone) when no such message exists at all, or this
						// call acked it first.
						exists, err := rdb.HExists(ctx, k.Msg, "s1-0").Result()
						require.NoError(t, err)
						acked := false
						for _, m := range r.Msgs {
							acked = acked || m.ID == "s1-0"
						}
						if exists && !acked {
							wantRes = append(wantRes, 0)
						} else {
							wantRes = append(wantRes, 2)
						}
						n++
					}
					ackArgs = append(ackArgs, n)
				}
				res, err := scripts.Ack.Run(ctx, rdb, ackKeys, append(ackArgs, pairs...)...).Int64Slice()
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

// fetchModel is what fetch.lua may take, computed from Redis's state
// before the call.
type fetchModel struct {
	call     scripts.FetchCall
	perGroup [][]redis.Z       // each group's store in consume order
	blocked  []map[string]bool // ids whose delivery is in prepare
	eligible [][]redis.Z       // each group's due, unblocked entries, in order
	scores   []float64         // the scores taken in any valid answer, in consume order
}

func (m *fetchModel) better(a, b float64) bool {
	if m.call.TimeBased {
		return a < b
	}
	return a > b
}

// modelFetch reads the groups of call and takes, in consume order, the best
// messages across them within each group's limit. Equal scores in different
// groups have no order between them, so which groups give the last tied
// entries may differ; the scores taken may not.
func modelFetch(t *testing.T, rdb *redis.Client, call scripts.FetchCall) *fetchModel {
	ctx := context.Background()
	m := &fetchModel{call: call}
	type entry struct {
		group int
		score float64
	}
	var all []entry
	now := float64(time.Now().UnixMilli())
	for g, grp := range call.Groups {
		zs, err := rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: grp.Store, Start: 0, Stop: -1, Rev: !call.TimeBased}).Result()
		require.NoError(t, err)
		m.perGroup = append(m.perGroup, zs)
		m.blocked = append(m.blocked, map[string]bool{})
		m.eligible = append(m.eligible, nil)
		for _, z := range zs {
			id := z.Member.(string)
			if rdb.ZScore(ctx, grp.Prepare, id).Err() == nil {
				m.blocked[g][id] = true
				continue
			}
			if call.TimeBased && z.Score > now {
				continue
			}
			m.eligible[g] = append(m.eligible[g], z)
			all = append(all, entry{g, z.Score})
		}
	}
	slices.SortStableFunc(all, func(a, b entry) int {
		if call.TimeBased {
			return cmp.Compare(a.score, b.score)
		}
		return cmp.Compare(b.score, a.score)
	})
	taken := make([]int, len(call.Groups))
	for _, e := range all {
		if len(m.scores) == call.N {
			break
		}
		if taken[e.group] < call.Groups[e.group].Max {
			taken[e.group]++
			m.scores = append(m.scores, e.score)
		}
	}
	return m
}

// check compares a reply with the model: the same scores taken, in consume
// order; each group's messages a run from the front of its due, unblocked
// entries, within its limit; and every group's new head.
func (m *fetchModel) check(t *testing.T, r scripts.FetchReply, trial int) {
	t.Helper()
	var scores []float64
	perGroup := make([][]string, len(m.call.Groups))
	for i, f := range r.Msgs {
		if i > 0 {
			require.False(t, m.better(f.Score, r.Msgs[i-1].Score), "trial %d: message %d (%v) is out of consume order", trial, i, f.Score)
		}
		scores = append(scores, f.Score)
		perGroup[f.Group] = append(perGroup[f.Group], f.ID)
	}
	require.Equal(t, m.scores, scores, "trial %d: scores taken, %+v", trial, m.call)
	var heads []float64
	for g, ids := range perGroup {
		require.LessOrEqual(t, len(ids), m.call.Groups[g].Max, "trial %d: group %d's limit", trial, g)
		var want []string
		for _, z := range m.eligible[g][:len(ids)] {
			want = append(want, z.Member.(string))
		}
		require.Equal(t, want, ids, "trial %d: group %d takes from its front", trial, g)
	}
	for g, zs := range m.perGroup {
		gone := map[string]bool{}
		for _, id := range perGroup[g] {
			gone[id] = true
		}
		head := -1.0
		looked := 0
		for _, z := range zs {
			id := z.Member.(string)
			if gone[id] {
				continue
			}
			if looked++; looked > 64 {
				break
			}
			if !m.blocked[g][id] {
				head = z.Score
				break
			}
			head = -2
		}
		heads = append(heads, head)
	}
	require.Equal(t, heads, r.Heads, "trial %d: heads", trial)
}
