package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	ackmux "github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// lifeEnv is one topic with some messages sent, for the commands of a
// job's life after hand-off.
type lifeEnv struct {
	t      *testing.T
	r      ctl
	c      *rmq.Client
	prefix string
	tp     topic.Topic
	rdb    *redis.Client
}

func newLifeEnv(t *testing.T, name string) *lifeEnv {
	bin := buildBinary(t)
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return &lifeEnv{t: t, r: ctl{t: t, bin: bin, global: []string{"--redis", srv.Addr(), "--prefix", prefix}},
		c: c, prefix: prefix, tp: topic.MustNew(name, topic.FixedTime, 4), rdb: rdb}
}

// send sends id, due a second ago (fetchable at once), body "body-"+id.
func (e *lifeEnv) send(ids ...string) {
	for _, id := range ids {
		_, err := e.c.Producer().SendFixedTime(context.Background(), e.tp, []byte("body-"+id), time.Now().Add(-time.Second), producer.WithKey(id))
		require.NoError(e.t, err)
	}
}

// complete finishes id as a consumer's ack does, through fetch.lua and
// the ack rounds with the slot's life keys, with result: a completed
// message as the consumers will record it.
func (e *lifeEnv) complete(id, result string, l rmq.Lifecycle) {
	t := e.t
	slot := slots.IndexString(id, e.tp.SlotAmount())
	k := keyspace.KeysFor(e.prefix, e.tp, slot)
	keys, args := scripts.FetchCall{TimeBased: true, N: 1, LeaseSec: 30, Window: 65,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 1}}}.Args()
	vals, err := scripts.Fetch.Run(context.Background(), e.rdb, keys, args...).Slice()
	require.NoError(t, err)
	fr, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	require.Len(t, fr.Msgs, 1)
	require.Equal(t, id, fr.Msgs[0].ID)
	req := &ackmux.Req{Keys: ackmux.SlotKeys(k, true), ID: id, Token: fr.Msgs[0].Token, Bound: 5 * time.Second,
		Life: keyspace.LifeKeysFor(e.prefix, e.tp.Name(), slot).Slice(), HasLife: true,
		Retention: l.Retention.Milliseconds(), Events: int64(l.Events), Result: []byte(result)}
	require.NoError(t, ackmux.New(e.rdb, nil).Do(context.Background(), req))
	require.Equal(t, int64(ackmux.Done), req.Code, "ack of %s", id)
}

// rmqctl lifecycle shows and sets a topic's settings (a flag not given
// keeps its value), refuses bad ones with exit 2; show prints a finished
// message's state and result; cancel cancels once, then says not found.
func TestRmqctlLifecycleShowCancel(t *testing.T) {
	e := newLifeEnv(t, "jobs")
	e.send("a", "b")
	r := e.r

	assert.Equal(t, "jobs: retention=0s events=0\n", r.ok("lifecycle", "jobs"))
	assert.Equal(t, "jobs: retention=1h0m0s events=0\n", r.ok("lifecycle", "jobs", "--retention", "1h"))
	assert.Equal(t, "jobs: retention=1h0m0s events=50\n", r.ok("lifecycle", "jobs", "--events", "50"))
	var lj map[string]any
	r.json(&lj, "lifecycle", "jobs")
	assert.Equal(t, map[string]any{"topic": "jobs", "retention": "1h0m0s", "retention_ms": float64(3600000), "events": float64(50)}, lj)
	bad := r.run("", "lifecycle", "jobs", "--events", "-1")
	assert.Equal(t, 2, bad.code, bad.stderr)
	assert.Contains(t, bad.stderr, "invalid")
	assert.Equal(t, "jobs: retention=1h0m0s events=50\n", r.ok("lifecycle", "jobs"), "nothing stored")

	out := r.ok("show", "jobs", "a")
	assert.Regexp(t, `(?m)^state:\s+waiting$`, out)
	assert.Contains(t, out, "body (text, 6 bytes):\nbody-a\n")

	assert.Equal(t, "cancelled a of jobs\n", r.ok("cancel", "jobs", "a"))
	again := r.run("", "cancel", "jobs", "a")
	assert.Equal(t, 1, again.code)
	assert.Equal(t, "rmqctl: no waiting or running message \"a\" in jobs\n", again.stderr)
	var cj map[string]any
	r.json(&cj, "cancel", "jobs", "b")
	assert.Equal(t, map[string]any{"topic": "jobs", "id": "b", "cancelled": true}, cj)

	out = r.ok("show", "jobs", "a")
	assert.Regexp(t, `(?m)^state:\s+cancelled$`, out)
	assert.Regexp(t, `(?m)^finished:\s+20\d\d-`, out)

	e.send("c")
	e.complete("c", "shipped\tfine", rmq.Lifecycle{Retention: time.Hour, Events: 50})
	out = r.ok("show", "jobs", "c")
	assert.Regexp(t, `(?m)^state:\s+completed$`, out)
	assert.Regexp(t, `(?m)^result:\s+shipped\\tfine$`, out)
	var mj messageJSON
	r.json(&mj, "show", "jobs", "c")
	require.NotNil(t, mj.Result)
	assert.Equal(t, "completed", mj.State)
	assert.Equal(t, "shipped\tfine", *mj.Result)
	assert.Equal(t, "text", mj.ResultEnc)
	assert.NotEmpty(t, mj.FinishedAt)

	st := r.ok("stats", "jobs")
	assert.Regexp(t, `(?m)^retained:\s+3 finished \(completed or cancelled\)$`, st)
	// Two cancels and a completion; and "sent" of c when the sending
	// producer had read the settings again since its first send (it does
	// within a second).
	assert.Regexp(t, `(?m)^event log:\s+[34] events$`, st)
	var sj statsJSON
	r.json(&sj, "stats", "jobs")
	assert.EqualValues(t, 3, sj.Retained)
	assert.Contains(t, []int64{3, 4}, sj.Events)

	nf := r.run("", "show", "jobs", "nope")
	assert.Equal(t, 1, nf.code)
	assert.Equal(t, "rmqctl: no message \"nope\" in jobs: not found\n", nf.stderr)
}

// rmqctl wait's exit status tells how a message finished: 0 completed
// (with its result), 3 dead, 4 cancelled, 5 not found, 6 timed out; a
// wait under way hears of a cancel.
func TestRmqctlWait(t *testing.T) {
	e := newLifeEnv(t, "work")
	r := e.r
	e.send("done", "gone", "slow", "later")
	r.ok("lifecycle", "work", "--retention", "1h", "--events", "100")
	e.complete("done", "42", rmq.Lifecycle{Retention: time.Hour, Events: 100})

	out := r.ok("wait", "work", "done")
	assert.Regexp(t, `(?m)^state:\s+completed$`, out)
	assert.Regexp(t, `(?m)^result:\s+42$`, out)
	var mj messageJSON
	r.json(&mj, "wait", "work", "done")
	assert.Equal(t, "42", *mj.Result)

	r.ok("cancel", "work", "gone")
	res := r.run("", "wait", "work", "gone")
	assert.Equal(t, exitCancelled, res.code, res.stderr)
	assert.Equal(t, "rmqctl: gone of work was cancelled\n", res.stderr)
	assert.Regexp(t, `(?m)^state:\s+cancelled$`, res.stdout)

	res = r.run("", "wait", "work", "never-sent")
	assert.Equal(t, exitNotFound, res.code, res.stderr)
	assert.Contains(t, res.stderr, "not found")

	// The bound is the behaviour under test: "slow" waits and nothing
	// finishes it.
	res = r.run("", "wait", "work", "slow", "--timeout", "200ms")
	assert.Equal(t, exitTimedOut, res.code, res.stderr)
	assert.Equal(t, "rmqctl: slow of work did not finish within 200ms\n", res.stderr)

	// A wait under way hears of the cancel: registered in the slot's
	// waiters hash first, so the cancel is what it must hear of.
	waiters := keyspace.LifeKeysFor(e.prefix, "work", slots.IndexString("later", 4)).Waiters
	got := make(chan result, 1)
	go func() { got <- r.run("", "wait", "work", "later") }()
	require.Eventually(t, func() bool {
		n, _ := e.rdb.HGet(context.Background(), waiters, "later").Int()
		return n >= 1
	}, 20*time.Second, 5*time.Millisecond, "wait never registered")
	r.ok("cancel", "work", "later")
	select {
	case res = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("rmqctl wait did not return after the cancel")
	}
	assert.Equal(t, exitCancelled, res.code, res.stderr)

	// A dead message: a consumer fails it with no retries.
	dead := topic.MustNew("doomed", topic.FixedTime, 2)
	ctx := context.Background()
	c2, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, c2.Register(dead, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		return errors.New("out of stock")
	}), consumer.WithMaxRetries(0)))
	require.NoError(t, c2.Start(ctx))
	_, err = c2.Producer().SendFixedTime(ctx, dead, []byte("x"), time.Now(), producer.WithKey("d1"))
	require.NoError(t, err)
	res = r.run("", "wait", "doomed", "d1")
	require.NoError(t, c2.Close(ctx))
	assert.Equal(t, exitDead, res.code, res.stderr)
	assert.Equal(t, "rmqctl: d1 of doomed is dead: out of stock\n", res.stderr)
	assert.Regexp(t, `(?m)^state:\s+dead$`, res.stdout)
}
