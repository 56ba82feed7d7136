package rmqtest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// Keys are the keys of one slot of tp under the Env's prefix.
func (e *Env) Keys(tp topic.Topic, slot int) keyspace.Keys {
	return keyspace.KeysFor(e.Prefix, tp, slot)
}

// ZScore is member's score in key; false when it is not there.
func (e *Env) ZScore(key, member string) (float64, bool) {
	e.T.Helper()
	s, err := e.RDB.ZScore(context.Background(), key, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(e.T, err)
	return s, true
}

// Envelope is the decoded envelope of id in hash; false when it is not
// there.
func (e *Env) Envelope(hash, id string) (scripts.Envelope, bool) {
	e.T.Helper()
	raw, err := e.RDB.HGet(context.Background(), hash, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return scripts.Envelope{}, false
	}
	require.NoError(e.T, err)
	env, err := scripts.DecodeEnvelope(raw)
	require.NoError(e.T, err)
	return env, true
}

// Counts are the sizes of store, prepare, msg, dead and deadmsg summed over
// every slot of a topic.
type Counts struct{ Store, Prepare, Msg, Dead, DeadMsg int64 }

// Counts reads tp's Counts.
func (e *Env) Counts(tp topic.Topic) Counts {
	e.T.Helper()
	ctx := context.Background()
	var c Counts
	for i := 0; i < tp.SlotAmount(); i++ {
		k := e.Keys(tp, i)
		pipe := e.RDB.Pipeline()
		s := pipe.ZCard(ctx, k.Store)
		p := pipe.ZCard(ctx, k.Prepare)
		m := pipe.HLen(ctx, k.Msg)
		d := pipe.ZCard(ctx, k.Dead)
		dm := pipe.HLen(ctx, k.DeadMsg)
		_, err := pipe.Exec(ctx)
		require.NoError(e.T, err)
		c.Store += s.Val()
		c.Prepare += p.Val()
		c.Msg += m.Val()
		c.Dead += d.Val()
		c.DeadMsg += dm.Val()
	}
	return c
}

// EventuallyCounts waits until tp's Counts are want.
func (e *Env) EventuallyCounts(tp topic.Topic, want Counts) {
	e.T.Helper()
	e.EventuallyCountsAre(tp, func(got Counts) bool { return got == want }, fmt.Sprintf("%+v", want))
}

// EventuallyQueues waits until tp's queues hold store, prepare and dead
// messages.
func (e *Env) EventuallyQueues(tp topic.Topic, store, prepare, dead int64) {
	e.T.Helper()
	e.EventuallyCountsAre(tp, func(got Counts) bool {
		return got.Store == store && got.Prepare == prepare && got.Dead == dead
	}, fmt.Sprintf("store/prepare/dead = %d/%d/%d", store, prepare, dead))
}

// EventuallyCountsAre waits until ok holds for tp's Counts; want describes
// ok in the failure message. Queues change inside Redis scripts, which
// tell no one: they are polled (redistest.Poll).
func (e *Env) EventuallyCountsAre(tp topic.Topic, ok func(Counts) bool, want string) {
	e.T.Helper()
	redistest.Poll(e.T, func() error {
		if got := e.Counts(tp); !ok(got) {
			return fmt.Errorf("counts of %s: got %+v, want %s", tp.Name(), got, want)
		}
		return nil
	})
}

// KeysNow lists every key of the data model under the Env's prefix: the
// clients' history and worker records are left out, since a running
// client writes them on its own (its heartbeat, the counts of what it did
// before), so they would make "a call wrote nothing" depend on timing.
func (e *Env) KeysNow() []string {
	e.T.Helper()
	var out []string
	for _, k := range redistest.KeysWithPrefix(e.T, e.RDB, e.Prefix) {
		if !strings.Contains(k, "}:hist:") && k != history.WorkersKey(e.Prefix) && !strings.HasPrefix(k, history.WorkerKey(e.Prefix, "")) {
			out = append(out, k)
		}
	}
	return out
}

// Dump returns every key of KeysNow with a printable form of its value,
// to show that a call wrote nothing.
func (e *Env) Dump() map[string]string {
	e.T.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range e.KeysNow() {
		v, err := e.RDB.Dump(ctx, k).Result()
		require.NoError(e.T, err)
		out[k] = hex.EncodeToString([]byte(v))
	}
	return out
}
