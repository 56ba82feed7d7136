package rmq_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/redisserver"
	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// Generous bounds: test machines are noisy and the race detector is slow.
const (
	waitLong  = 15 * time.Second // for something that must happen
	waitQuiet = 700 * time.Millisecond
)

// syncBuffer is a bytes.Buffer safe for the library's goroutines to log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// backend is one kind of Redis the behaviour suite runs against: the shared
// single redis-server, or the shared 3-master/3-replica cluster.
type backend struct {
	name    string
	cluster bool
}

var (
	singleNode = backend{name: "single"}
	cluster    = backend{name: "cluster", cluster: true}
	// backends is the table every behaviour test runs over.
	backends = []backend{singleNode, cluster}
)

// forEachBackend runs f once per backend, as parallel subtests named after
// the backend, each with its own env.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, newEnvFor(t, b))
		})
	}
}

// forEachBackendSerial is forEachBackend for tests that must not run in
// parallel (goleak, race reports pinned to one test).
func forEachBackendSerial(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, newEnvFor(t, b)) })
	}
}

// env is one test's view of Redis: a client on the shared (or a dedicated)
// server or cluster, a unique key prefix and a log buffer shown when the
// test fails. Every Redis client it makes checks that each script call
// names keys of one cluster hash slot (keySlotCheck).
type env struct {
	t       *testing.T
	backend backend
	srv     *redisserver.Server  // single node; nil on a cluster
	cl      *redisserver.Cluster // cluster; nil on a single node
	rdb     redis.UniversalClient
	prefix  string
	log     *syncBuffer
	logger  *slog.Logger
	scripts *keySlotCheck
}

// newEnv is a single-node env on the shared server.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, redistest.Shared(t))
}

// newEnvFor is an env on the shared server or the shared cluster.
func newEnvFor(t *testing.T, b backend) *env {
	t.Helper()
	if b.cluster {
		return newClusterEnvOn(t, redistest.SharedCluster(t))
	}
	return newEnv(t)
}

func newEnvOn(t *testing.T, srv *redisserver.Server) *env {
	t.Helper()
	e := &env{t: t, backend: singleNode, srv: srv}
	e.init()
	return e
}

// newClusterEnvOn is an env on cl, the shared cluster or one of the test's
// own (redistest.StartCluster) when the test disturbs it.
func newClusterEnvOn(t *testing.T, cl *redisserver.Cluster) *env {
	t.Helper()
	e := &env{t: t, backend: cluster, cl: cl}
	e.init()
	return e
}

func (e *env) init() {
	t := e.t
	e.prefix = testPrefix(t)
	e.log = &syncBuffer{}
	e.logger = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.scripts = newKeySlotCheck(e.backend != cluster)
	e.rdb = e.newRedis()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("library log:\n%s", e.log.String())
		}
	})
	t.Cleanup(func() { e.scripts.verify(t) })
}

// testPrefix is redistest.Prefix, checked to be a valid key prefix.
func testPrefix(t *testing.T) string {
	p := redistest.Prefix(t)
	require.NoError(t, slots.ValidatePrefix(p))
	return p
}

// newRedis returns another client on the env's server or cluster (e.g. one
// to add hooks to); it checks the key slots of script calls too.
func (e *env) newRedis() redis.UniversalClient {
	var rdb redis.UniversalClient
	if e.cl != nil {
		rdb = redistest.ClusterClient(e.t, e.cl)
	} else {
		rdb = redistest.Client(e.t, e.srv)
	}
	rdb.AddHook(redistest.Observer{Before: e.scripts.observe})
	return rdb
}

// client returns an rmq.Client on the env's prefix, closed at the end of the
// test (before the Redis client is).
func (e *env) client(opts ...rmq.Option) *rmq.Client {
	e.t.Helper()
	return e.clientOn(e.rdb, opts...)
}

func (e *env) clientOn(rdb redis.UniversalClient, opts ...rmq.Option) *rmq.Client {
	e.t.Helper()
	base := []rmq.Option{rmq.WithPrefix(e.prefix), rmq.WithLogger(e.logger)}
	c, err := rmq.New(rdb, append(base, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			e.t.Errorf("close client: %v", err)
		}
	})
	return c
}

func (e *env) start(c *rmq.Client) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.t, c.Start(ctx))
}

func mustTopic(t *testing.T, name string, typ topic.Type, slotAmount int) topic.Topic {
	t.Helper()
	tp, err := topic.New(name, typ, slotAmount)
	require.NoError(t, err)
	return tp
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// delivery is what a handler saw, copied out of the Message.
type delivery struct {
	ID        string
	Body      string
	Slot      int
	Attempt   int
	DueAt     time.Time
	Priority  int64
	LastError string
	Token     int64
	At        time.Time // local clock when the handler started
}

func (d delivery) String() string {
	return fmt.Sprintf("%s#%d(prio %d, due %s)", d.ID, d.Attempt, d.Priority, d.DueAt.Format("15:04:05.000"))
}

func snap(m *consumer.Message) delivery {
	return delivery{
		ID: m.ID, Body: string(m.Body), Slot: m.Slot, Attempt: m.Attempt, DueAt: m.DueAt,
		Priority: m.Priority, LastError: m.LastError, Token: m.Token, At: time.Now(),
	}
}

// recorder is a listener that reports every delivery on a channel and then
// runs an optional behaviour (nil: ack).
type recorder struct {
	ch      chan delivery
	running atomic.Int64
	maxRun  atomic.Int64
	then    func(ctx context.Context, m *consumer.Message) error
}

func newRecorder(then func(ctx context.Context, m *consumer.Message) error) *recorder {
	return &recorder{ch: make(chan delivery, 1024), then: then}
}

func (r *recorder) OnMessage(ctx context.Context, m *consumer.Message) error {
	n := r.running.Add(1)
	defer r.running.Add(-1)
	for {
		old := r.maxRun.Load()
		if n <= old || r.maxRun.CompareAndSwap(old, n) {
			break
		}
	}
	r.ch <- snap(m)
	if r.then == nil {
		return nil
	}
	return r.then(ctx, m)
}

// next waits for the next delivery.
func (r *recorder) next(t *testing.T, within time.Duration) delivery {
	t.Helper()
	select {
	case d := <-r.ch:
		return d
	case <-time.After(within):
		t.Fatalf("no delivery within %v", within)
		return delivery{}
	}
}

// nextN waits for n deliveries.
func (r *recorder) nextN(t *testing.T, n int, within time.Duration) []delivery {
	t.Helper()
	out := make([]delivery, 0, n)
	deadline := time.After(within)
	for len(out) < n {
		select {
		case d := <-r.ch:
			out = append(out, d)
		case <-deadline:
			t.Fatalf("got %d of %d deliveries within %v: %v", len(out), n, within, out)
		}
	}
	return out
}

// none checks that nothing is delivered for d.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.ch:
		t.Fatalf("unexpected delivery %v", got)
	case <-time.After(d):
	}
}

func ack(context.Context, *consumer.Message) error { return nil }

func noBackoff(int) time.Duration { return 0 }

// ---- Redis state -------------------------------------------------------

func (e *env) keys(tp topic.Topic, slot int) slots.Keys {
	return slots.KeysFor(e.prefix, tp, slot)
}

// slotOfKey is the slot of a message sent WithKey(key) and no slot basis.
func slotOfKey(tp topic.Topic, key string) int { return slots.IndexString(key, tp.SlotAmount()) }

func (e *env) zscore(key, member string) (float64, bool) {
	e.t.Helper()
	s, err := e.rdb.ZScore(context.Background(), key, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(e.t, err)
	return s, true
}

func (e *env) envelope(hash, id string) (scripts.Envelope, bool) {
	e.t.Helper()
	raw, err := e.rdb.HGet(context.Background(), hash, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return scripts.Envelope{}, false
	}
	require.NoError(e.t, err)
	env, err := scripts.DecodeEnvelope(raw)
	require.NoError(e.t, err)
	return env, true
}

// counts sums, over every slot of tp, the sizes of store, prepare, msg,
// dead and deadmsg.
type counts struct{ Store, Prepare, Msg, Dead, DeadMsg int64 }

func (e *env) counts(tp topic.Topic) counts {
	e.t.Helper()
	ctx := context.Background()
	var c counts
	for i := 0; i < tp.SlotAmount(); i++ {
		k := e.keys(tp, i)
		pipe := e.rdb.Pipeline()
		s := pipe.ZCard(ctx, k.Store)
		p := pipe.ZCard(ctx, k.Prepare)
		m := pipe.HLen(ctx, k.Msg)
		d := pipe.ZCard(ctx, k.Dead)
		dm := pipe.HLen(ctx, k.DeadMsg)
		_, err := pipe.Exec(ctx)
		require.NoError(e.t, err)
		c.Store += s.Val()
		c.Prepare += p.Val()
		c.Msg += m.Val()
		c.Dead += d.Val()
		c.DeadMsg += dm.Val()
	}
	return c
}

// eventuallyCounts waits until the topic's counts are want.
func (e *env) eventuallyCounts(tp topic.Topic, want counts) {
	e.t.Helper()
	e.eventuallyCountsAre(tp, func(got counts) bool { return got == want }, fmt.Sprintf("%+v", want))
}

// eventuallyCountsAre waits until ok holds for the topic's counts; want
// describes ok in the failure message.
func (e *env) eventuallyCountsAre(tp topic.Topic, ok func(counts) bool, want string) {
	e.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		got := e.counts(tp)
		if ok(got) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("counts of %s: got %+v, want %s", tp.Name(), got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keysNow lists every key under the env's prefix.
func (e *env) keysNow() []string {
	e.t.Helper()
	return redistest.KeysWithPrefix(e.t, e.rdb, e.prefix)
}

// dump returns every key under the prefix with a printable form of its value,
// to show that a call wrote nothing.
func (e *env) dump() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range e.keysNow() {
		v, err := e.rdb.Dump(ctx, k).Result()
		require.NoError(e.t, err)
		out[k] = hex.EncodeToString([]byte(v))
	}
	return out
}

// prepareToken splits a prepare score into its deadline (Unix seconds) and
// the delivery token.
func prepareToken(score float64) (deadline int64, token int64) {
	return scripts.SplitPrepareScore(score)
}

// ---- counting script calls ----------------------------------------------

// scriptCounter is a go-redis hook counting EVALSHA/EVAL calls of one script,
// pipelined or not.
type scriptCounter struct {
	sha   string
	calls atomic.Int64
}

func newScriptCounter(s *redis.Script) *scriptCounter { return &scriptCounter{sha: s.Hash()} }

// clientCountingFetches returns a client on a Redis connection of its own
// whose fetch.lua calls are counted.
func (e *env) clientCountingFetches() (*rmq.Client, *scriptCounter) {
	e.t.Helper()
	rdb := e.newRedis()
	fetches := newScriptCounter(scripts.Fetch)
	rdb.AddHook(redistest.Observer{Before: fetches.observe})
	return e.clientOn(rdb), fetches
}

func (h *scriptCounter) observe(cmd redis.Cmder) {
	if sha, ok := scriptSHA(cmd); ok && sha == h.sha {
		h.calls.Add(1)
	}
}

// scriptSHA returns the SHA1 of the script an EVAL or EVALSHA (or their _RO
// forms) runs.
func scriptSHA(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha", "evalsha_ro":
		return fmt.Sprint(args[1]), true
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		return hex.EncodeToString(sum[:]), true
	}
	return "", false
}

func (h *scriptCounter) n() int64 { return h.calls.Load() }

// pastScore is a prepare score whose deadline lies 10 s in the past but which
// keeps the delivery token of score.
func pastScore(score float64) float64 {
	token := math.Mod(score, scripts.TokenMod)
	return float64((time.Now().Unix()-10)*scripts.TokenMod) + token
}

// outcomeObserver passes each delivery's outcome on, in order.
type outcomeObserver chan<- consumer.Outcome

func (o outcomeObserver) Sent(topic.Topic, producer.SendResult) {}
func (o outcomeObserver) Removed(topic.Topic, bool)             {}
func (o outcomeObserver) Delivered(*consumer.Message)           {}
func (o outcomeObserver) LeasesExpired(string, int, int)        {}

func (o outcomeObserver) Finished(_ *consumer.Message, _ time.Duration, out consumer.Outcome, _ error) {
	o <- out
}

// producerOn is the producer of a client on rdb under prefix: a producer
// alone, as a send-only program makes one.
func producerOn(t testing.TB, rdb redis.UniversalClient, prefix string) *producer.Producer {
	t.Helper()
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	require.NoError(t, err)
	return c.Producer()
}
