package scripts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// One ack.lua call may carry groups of different topics (a client's acks
// of all its topics on a single node): a time-based topic's group names its
// store key as the delayed key, a priority topic's its delayed set, and
// each ack is answered as a call of its own group alone would answer it.
func TestAckCallAcrossTopics(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	mk := func(name string, typ int) *slot {
		tp := topic.MustNew(name, topic.Type(typ), 1)
		return &slot{t: t, ctx: context.Background(), rdb: rdb, k: keyspace.KeysFor(prefix, tp, 0), typ: typ}
	}
	ft, pr := mk("ackmux.ft", 3), mk("ackmux.pr", 2)

	// Fixed-time: a1 acked (its re-send during prepare waits in store and
	// keeps its body), a2 named with a stale token, "nobody" unknown.
	ft.send("a1", past(), "a1")
	ft.send("a2", past(), "a2")
	_, got := ft.fetch(2, 30)
	require.Len(t, got, 2)
	tok := map[string]int64{}
	for _, d := range got {
		tok[d.id] = d.token
	}
	ft.send("a1", past(), "a1 again")

	// Priority: b1 acked by token, b2 by id (token -1) with a re-send
	// waiting in delayed (kept), b3 dead-lettered (its ack by id refused).
	for _, id := range []string{"b1", "b2", "b3"} {
		pr.send(id, 100, id)
	}
	_, got = pr.fetch(3, 30)
	require.Len(t, got, 3)
	for _, d := range got {
		tok[d.id] = d.token
	}
	require.Equal(t, int64(3), pr.rollback(0, "b3", tok["b3"], "no"), "b3 dead")
	pr.sendOpts("b2", 100, scripts.Options{NotBeforeMs: future()}, "b2 later")
	require.True(t, pr.where("b2").delayed)

	keys := []string{ft.k.Store, ft.k.Prepare, ft.k.Msg, ft.k.Wake, ft.k.Store, ft.k.Dead,
		pr.k.Store, pr.k.Prepare, pr.k.Msg, pr.k.Wake, pr.k.Delayed, pr.k.Dead}
	args := []any{"PUBLISH", 3, 3,
		"a1", tok["a1"], "a2", tok["a2"] + 1, "nobody", tok["a1"],
		"b1", tok["b1"], "b2", -1, "b3", -1}
	res, err := scripts.Ack.Run(context.Background(), rdb, keys, args...).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0, 2, 1, 1, 0}, res)

	assert.Equal(t, where{store: true, msg: true}, ft.where("a1"), "the re-send waits")
	assert.Equal(t, "a1 again", string(ft.envelope(ft.k.Msg, "a1").Body))
	assert.Equal(t, where{prepare: true, msg: true}, ft.where("a2"), "a stale token changes nothing")
	assert.Equal(t, where{}, pr.where("b1"))
	assert.Equal(t, where{msg: true, delayed: true}, pr.where("b2"), "the delayed re-send keeps its body")
	assert.Equal(t, where{dead: true, deadmsg: true}, pr.where("b3"))
}
