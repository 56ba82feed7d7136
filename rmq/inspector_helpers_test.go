package rmq_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// slotRef names one slot of a topic.
type slotRef struct {
	topic string
	slot  int
}

// newCheckedEnv is newEnv whose keys are checked when the test ends, after
// every client of the test is closed (see checkNoOrphans).
func newCheckedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	t.Cleanup(func() { checkNoOrphans(t, e.rdb, e.prefix) })
	return e
}

// checkNoOrphans scans every key under prefix and reports keys that are not
// part of the data model, and hash entries without their sorted-set entry
// (or the reverse); the epoch key of ZooKeeper mode is allowed: every msg field has a store or prepare entry and every
// store or prepare entry a msg field; deadmsg fields and dead entries match
// one to one; every envelope decodes.
func checkNoOrphans(t *testing.T, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys := redistest.KeysWithPrefix(t, rdb, prefix)
	defs, err := rdb.HGetAll(ctx, keyspace.TopicsKey(prefix)).Result()
	require.NoError(t, err)
	// The keys the data model allows: those of every slot of every defined
	// topic, named by keyspace.KeysFor (and the epoch key of ZooKeeper mode).
	allowed := map[string]slotRef{}
	topics := map[string]topic.Topic{}
	for name, def := range defs {
		tp, err := topic.ParseDefinition(name, def)
		require.NoError(t, err)
		topics[name] = tp
		for s := range tp.SlotAmount() {
			k := keyspace.KeysFor(prefix, tp, s)
			ref := slotRef{name, s}
			for _, key := range []string{k.Store, k.Prepare, k.Dead, k.Msg, k.DeadMsg, strings.TrimSuffix(k.Store, "store") + "epoch"} {
				allowed[key] = ref
			}
		}
	}
	seen := map[slotRef]bool{}
	for _, k := range keys {
		if k == keyspace.TopicsKey(prefix) || isHistoryKey(prefix, k) {
			continue
		}
		ref, ok := allowed[k]
		if !ok && isConfirmRecord(t, rdb, k, allowed) {
			continue
		}
		if !ok {
			t.Errorf("stray key %q (not a key of any slot of a defined topic)", k)
			continue
		}
		seen[ref] = true
	}
	for ref := range seen {
		k := keyspace.KeysFor(prefix, topics[ref.topic], ref.slot)
		store := zmembers(t, rdb, k.Store)
		prepare := zmembers(t, rdb, k.Prepare)
		dead := zmembers(t, rdb, k.Dead)
		msg := hfields(t, rdb, k.Msg)
		deadmsg := hfields(t, rdb, k.DeadMsg)
		live := map[string]bool{}
		for id := range store {
			live[id] = true
		}
		for id := range prepare {
			live[id] = true
		}
		for id := range msg {
			if !live[id] {
				t.Errorf("%s: orphan msg entry %q (not in store or prepare)", k.Msg, id)
			}
		}
		for id := range live {
			if !msg[id] {
				t.Errorf("%s: %q waits or is in flight without a body", k.Msg, id)
			}
		}
		for id := range deadmsg {
			if !dead[id] {
				t.Errorf("%s: orphan deadmsg entry %q (not in dead)", k.DeadMsg, id)
			}
		}
		for id := range dead {
			if !deadmsg[id] {
				t.Errorf("%s: dead %q without a body", k.Dead, id)
			}
		}
		for _, h := range []string{k.Msg, k.DeadMsg} {
			vals, err := rdb.HGetAll(ctx, h).Result()
			require.NoError(t, err)
			for id, v := range vals {
				_, err := scripts.DecodeEnvelope([]byte(v))
				assert.NoError(t, err, "%s %s", h, id)
			}
		}
	}
}

func zmembers(t *testing.T, rdb redis.UniversalClient, key string) map[string]bool {
	t.Helper()
	ids, err := rdb.ZRange(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func hfields(t *testing.T, rdb redis.UniversalClient, key string) map[string]bool {
	t.Helper()
	ids, err := rdb.HKeys(context.Background(), key).Result()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// send sends one message with key as its id in the way tp's type wants:
// due now (fixed-time), a range of 0 (range-merge) or priority 100.
func send(t *testing.T, p *producer.Producer, tp topic.Topic, key, body string) {
	t.Helper()
	sendAt(t, p, tp, key, body, time.Now(), 100)
}

func sendAt(t *testing.T, p *producer.Producer, tp topic.Topic, key, body string, at time.Time, priority int64) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch tp.Type() {
	case topic.FixedTime:
		_, err = p.SendFixedTime(ctx, tp, []byte(body), at, producer.WithKey(key))
	case topic.RangeMerge:
		_, err = p.SendRangeMerge(ctx, tp, []byte(body), max(time.Until(at), 0), producer.WithKey(key))
	case topic.Priority:
		_, err = p.SendPriority(ctx, tp, []byte(body), priority, producer.WithKey(key))
	}
	require.NoError(t, err)
}

// makeDead sends one message per key (body "body-<key>") and lets a
// consumer with WithMaxRetries(0) fail each once ("failed <key>"), so they
// end in the dead queue the way real messages do. The consumer is closed
// before it returns.
func (e *env) makeDead(tp topic.Topic, keys ...string) {
	e.t.Helper()
	ctx := ctxT(e.t)
	c := e.client()
	require.NoError(e.t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return fmt.Errorf("failed %s", m.ID)
	}), consumer.WithMaxRetries(0), consumer.WithConcurrency(64)))
	e.start(c)
	before := e.counts(tp).Dead
	for _, k := range keys {
		send(e.t, c.Producer(), tp, k, "body-"+k)
	}
	e.waitDead(tp, before+int64(len(keys)))
	require.NoError(e.t, c.Close(ctx))
}

// waitDead waits until tp's dead queues hold n messages.
func (e *env) waitDead(tp topic.Topic, n int64) {
	e.t.Helper()
	e.eventuallyCountsAre(tp, func(got counts) bool { return got.Dead == n && got.DeadMsg == n }, fmt.Sprintf("Dead and DeadMsg %d", n))
}

// fakeDead writes dead entries straight into a slot, as rollback.lua would
// leave them: died at the given ms, body "body-<id>", one failed attempt.
// Tests of paging use it to build large or tie-heavy dead queues quickly.
func (e *env) fakeDead(tp topic.Topic, slot int, ids []string, diedMs func(j int) float64) {
	e.t.Helper()
	ctx := context.Background()
	k := e.keys(tp, slot)
	require.NoError(e.t, topicstore.Define(ctx, e.rdb, keyspace.TopicsKey(e.prefix), tp))
	for from := 0; from < len(ids); from += 1000 {
		pipe := e.rdb.Pipeline()
		for j := from; j < min(len(ids), from+1000); j++ {
			id := ids[j]
			env := scripts.Envelope{
				Type: int(tp.Type()), Failures: 1, FirstSentMs: diedMs(j) - 1000,
				Score: 100, OrigScore: 100, LastError: "failed " + id, Body: []byte("body-" + id),
			}
			pipe.ZAdd(ctx, k.Dead, redis.Z{Score: diedMs(j), Member: id})
			pipe.HSet(ctx, k.DeadMsg, id, scripts.EncodeEnvelope(env))
		}
		_, err := pipe.Exec(ctx)
		require.NoError(e.t, err)
	}
}

// allDead pages through the whole dead queue of tp with pages of limit.
func allDead(t *testing.T, insp *rmq.Inspector, tp topic.Topic, limit int) []rmq.DeadMessage {
	t.Helper()
	var out []rmq.DeadMessage
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100000, "paging does not end")
		page, err := insp.Dead(context.Background(), tp, rmq.WithLimit(limit), rmq.WithCursor(cursor))
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), limit)
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		cursor = page[len(page)-1].Cursor()
	}
}

func ids[M interface {
	rmq.DeadMessage | rmq.WaitingMessage
}](ms []M) []string {
	out := make([]string, len(ms))
	for j, m := range ms {
		switch x := any(m).(type) {
		case rmq.DeadMessage:
			out[j] = x.ID
		case rmq.WaitingMessage:
			out[j] = x.ID
		}
	}
	return out
}

// fetchOne moves the first due message of a slot to prepare with the real
// fetch script, as a consumer would, and checks that it is id. It returns
// the envelope and the delivery token.
func fetchOne(t *testing.T, e *env, tp topic.Topic, slot int, id string) (scripts.Envelope, int64) {
	t.Helper()
	k := e.keys(tp, slot)
	tb := "0"
	if tp.Type().TimeBased() {
		tb = "1"
	}
	r := fetchDirect(t, e.rdb, k, tb == "1", 1, 30)
	require.Len(t, r.Msgs, 1, "nothing fetched")
	require.Equal(t, id, r.Msgs[0].ID)
	env, err := scripts.DecodeEnvelope([]byte(r.Msgs[0].Envelope))
	require.NoError(t, err)
	return env, r.Msgs[0].Token
}

// fetchDirect runs fetch.lua on one slot as a consumer would.
func fetchDirect(t *testing.T, rdb redis.UniversalClient, k keyspace.Keys, timeBased bool, n int, leaseSec int64) scripts.FetchReply {
	t.Helper()
	keys, args := scripts.FetchCall{TimeBased: timeBased, N: n, LeaseSec: leaseSec, Window: n + 64,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: n}}}.Args()
	vals, err := scripts.Fetch.Run(context.Background(), rdb, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	return r
}

// ackOne acks a delivery made by fetchOne with the real ack script.
func ackOne(t *testing.T, e *env, tp topic.Topic, slot int, id string, token int64) {
	t.Helper()
	k := e.keys(tp, slot)
	res, err := scripts.Ack.Run(context.Background(), e.rdb, []string{k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed, k.Dead}, "", 1, id, token).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, []int64{1}, res, "ack refused")
}

func startDedicated(t *testing.T) *redisserver.Server {
	t.Helper()
	return redistest.Start(t, redisserver.Config{})
}

func redistestClusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	return redistest.ClusterClient(t, redistest.SharedCluster(t))
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// zrangeCounter is a go-redis hook that counts the entries ZRANGE-family
// replies carry, to show how much of a queue a call read.
type zrangeCounter struct{ entries atomic.Int64 }

func newZRangeCounter() *zrangeCounter { return &zrangeCounter{} }

func (h *zrangeCounter) reset()   { h.entries.Store(0) }
func (h *zrangeCounter) n() int64 { return h.entries.Load() }

func (h *zrangeCounter) count(cmd redis.Cmder) {
	name := strings.ToLower(cmd.Name())
	if !strings.HasPrefix(name, "zrange") && !strings.HasPrefix(name, "zrevrange") {
		return
	}
	switch c := cmd.(type) {
	case *redis.ZSliceCmd:
		h.entries.Add(int64(len(c.Val())))
	case *redis.StringSliceCmd:
		h.entries.Add(int64(len(c.Val())))
	}
}

// isConfirmRecord reports whether key is a lookahead confirm call's record
// (the prepare key of a slot of a defined topic, ":confirm:" and the
// call's nonce), which the data model keeps for a minute so that a resent
// call recognises its own run: it must expire.
func isConfirmRecord(t *testing.T, rdb redis.UniversalClient, key string, allowed map[string]slotRef) bool {
	t.Helper()
	i := strings.LastIndex(key, ":confirm:")
	if i < 0 || !strings.HasSuffix(key[:i], ":prepare") {
		return false
	}
	if _, ok := allowed[key[:i]]; !ok {
		return false
	}
	ttl, err := rdb.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "confirm record %q must expire", key)
	return true
}

// isHistoryKey reports whether k is a key of the clients' history or worker
// records, which live beside the data model.
func isHistoryKey(prefix, k string) bool {
	return strings.Contains(k, "}:hist:") || k == history.WorkersKey(prefix) || strings.HasPrefix(k, history.WorkerKey(prefix, ""))
}
