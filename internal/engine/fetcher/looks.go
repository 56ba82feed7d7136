package fetcher

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/groupcommit"
)

// A fetcher knows nothing of its slots when it starts and would read every
// one of them with a fetch (one script section naming them all). Most
// topics are empty then, and a client starting 1,000 topics of 16 slots
// would spend its start reading 16,000 empty sets. So a fetcher that can
// (a single node, every slot its own: engine.merged) first asks whether
// any of its slots' waiting sets exists at all: one EXISTS, and the EXISTS
// of the engines that start together share a pipelined round trip. Where
// none exists, every slot is known empty; a message sent later is heard as
// a wake-up (the subscription was confirmed before the fetcher started),
// and one sent earlier was counted by EXISTS.

// lookRoundsInFlight bounds the look rounds under way at once.
const lookRoundsInFlight = 2

// lookReq asks how many of keys exist.
type lookReq struct {
	keys []string
	n    int64 // set by the round
	err  error
}

// Looks are the first looks of a client's fetchers, in shared rounds.
type Looks struct{ g *groupcommit.Group[*lookReq] }

// NewLooks returns the looks of the client rdb.
func NewLooks(rdb redis.UniversalClient) *Looks {
	return &Looks{g: groupcommit.New(lookRoundsInFlight, func(ctx context.Context, batch []*lookReq) {
		pipe := rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(batch))
		for i, r := range batch {
			cmds[i] = pipe.Exists(ctx, r.keys...)
		}
		_, _ = pipe.Exec(ctx)
		for i, r := range batch {
			r.n, r.err = cmds[i].Result()
		}
	}, nil)}
}

// lookFirst marks every slot known empty when none of the topic's waiting
// sets (store, and delayed for priority topics) exists. On any doubt (a
// failed read, a set that exists) the slots stay unknown and the first
// fetch reads them as before.
func (f *Fetcher) lookFirst(ctx context.Context) {
	if !f.p.Merged || !f.p.HubRDB {
		// The hub's rounds ask the hub's client: only an engine on that
		// same single node may take their answer.
		return
	}
	keys := make([]string, 0, 2*len(f.p.Keys))
	for _, k := range f.p.Keys {
		keys = append(keys, k.Store)
		if f.dheads != nil {
			keys = append(keys, k.Delayed)
		}
	}
	r := &lookReq{keys: keys}
	if err := f.p.Looks.g.Do(ctx, r); err != nil || r.err != nil || r.n != 0 {
		return
	}
	for i := range f.heads {
		f.heads[i] = slotHead{known: true, empty: true}
	}
	for i := range f.dheads {
		f.dheads[i] = -1
	}
}
