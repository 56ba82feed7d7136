package rmq_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// waitLong bounds a wait for something that must happen: generous, since
// test machines are noisy and the race detector is slow.
const waitLong = rmqtest.WaitLong

// backend is one kind of Redis the behaviour suite runs against: the shared
// single redis-server, or the shared 3-master/3-replica cluster.
type backend = rmqtest.Backend

var (
	cluster = rmqtest.Cluster
	// backends is the table every behaviour test runs over.
	backends = rmqtest.Backends
)

// forEachBackend runs f once per backend, as parallel subtests named after
// the backend, each with its own env.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
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
		t.Run(b.Name, func(t *testing.T) { f(t, newEnvFor(t, b)) })
	}
}

// env is one test's view of Redis: an rmqtest.Env (the scaffolding rmq's
// tests share with the other packages built on rmq) under the short names
// rmq's tests are written with. The fields are copies of the Env's own
// (a test that replaces one sets both: e.RDB, e.rdb = rdb, rdb) and each
// method is one line onto the Env.
type env struct {
	*rmqtest.Env
	t       *testing.T
	rdb     redis.UniversalClient
	prefix  string
	srv     *redisserver.Server  // single node; nil on a cluster
	cl      *redisserver.Cluster // cluster; nil on a single node
	log     *rmqtest.SyncBuffer
	logger  *slog.Logger
	scripts *rmqtest.KeySlotCheck
}

func wrap(e *rmqtest.Env) *env {
	return &env{Env: e, t: e.T, rdb: e.RDB, prefix: e.Prefix, srv: e.Srv, cl: e.Cl, log: e.Log, logger: e.Logger, scripts: e.Scripts}
}

// newEnv is a single-node env on the shared server.
func newEnv(t *testing.T) *env { return wrap(rmqtest.New(t)) }

// newEnvFor is an env on the shared server or the shared cluster.
func newEnvFor(t *testing.T, b backend) *env { return wrap(rmqtest.NewFor(t, b)) }

// newEnvOn is an env on srv, e.g. a server of the test's own.
func newEnvOn(t *testing.T, srv *redisserver.Server) *env { return wrap(rmqtest.NewOn(t, srv)) }

// newClusterEnvOn is an env on cl, the shared cluster or one of the test's
// own (redistest.StartCluster) when the test disturbs it.
func newClusterEnvOn(t *testing.T, cl *redisserver.Cluster) *env {
	return wrap(rmqtest.NewOnCluster(t, cl))
}

func (e *env) newRedis() redis.UniversalClient { return e.NewRedis() }

func (e *env) client(opts ...rmq.Option) *rmq.Client { e.t.Helper(); return e.Client(opts...) }

func (e *env) clientOn(rdb redis.UniversalClient, opts ...rmq.Option) *rmq.Client {
	e.t.Helper()
	return e.ClientOn(rdb, opts...)
}

func (e *env) start(c *rmq.Client) { e.t.Helper(); e.Start(c) }

func (e *env) addrs() string { return e.Addrs() }

// waitFetchersAsleep waits until the clients e started run n fetchers, all
// asleep: a message sent next reaches them only by a wake-up.
func (e *env) waitFetchersAsleep(n int) { e.t.Helper(); e.WaitFetchersAsleep(n) }

// waitPullsWaiting waits until n Pulls made under e.Labelled long-poll.
func (e *env) waitPullsWaiting(n int) { e.t.Helper(); e.WaitPullsWaiting(n) }

func mustTopic(t *testing.T, name string, typ topic.Type, slotAmount int) topic.Topic {
	t.Helper()
	return rmqtest.MustTopic(t, name, typ, slotAmount)
}

func ctxT(t *testing.T) context.Context { return rmqtest.Ctx(t) }

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

// drained checks that rec got no delivery beyond those the test took, and
// never will: it waits until tp holds want in Redis with nothing left to
// deliver (no message in store and no body in msg; dead messages, and the
// tombstone a removal leaves in prepare until its lease ends, may stay),
// then finds no delivery recorded. No fixed wait, and it fails on a
// delivery too many: a message is delivered only out of store, with its
// body, and stays in prepare (leased) with its body until its listener
// call has ended, so once no body is left every delivery there will be of
// tp's messages is in the recorder.
func (r *recorder) drained(t *testing.T, e *env, tp topic.Topic, want counts) {
	t.Helper()
	require.Zero(t, want.Store+want.Msg, "drained: %+v has messages still to deliver", want)
	e.eventuallyCounts(tp, want)
	r.nothingYet(t)
}

// nothingYet checks that no delivery was recorded beyond those the test
// took, at once: for after an event that ends deliveries (drained's empty
// queues, a Close that returned).
func (r *recorder) nothingYet(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.ch:
		t.Fatalf("unexpected delivery %v", got)
	default:
	}
}

// none checks that nothing is delivered for d: a fixed wait, for a message
// that waits in Redis and must not be delivered yet (its topic paused, its
// due time or lease still to come), where no later event can show that it
// will not be. It is the fixed wait of rmq's tests with quiet; where the
// topic drains, drained says more, at once.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.ch:
		t.Fatalf("unexpected delivery %v", got)
	case <-time.After(d):
	}
}

// quiet gives the library d to do what it must not (start a listener call
// beyond its concurrency, fetch what is paused) where nothing observable
// would tell that it will not; the caller then checks that it did not.
// Like recorder.none (and requireNotTakenBefore and requireNoPlaceFor,
// which look meanwhile), it waits for something not to happen: d times
// the behaviour under test.
func quiet(d time.Duration) { time.Sleep(d) }

func ack(context.Context, *consumer.Message) error { return nil }

func noBackoff(int) time.Duration { return 0 }

// ---- Redis state -------------------------------------------------------

func (e *env) keys(tp topic.Topic, slot int) keyspace.Keys { return e.Keys(tp, slot) }

// slotOfKey is the slot of a message sent WithKey(key) and no slot basis.
func slotOfKey(tp topic.Topic, key string) int { return slots.IndexString(key, tp.SlotAmount()) }

func (e *env) zscore(key, member string) (float64, bool) { e.t.Helper(); return e.ZScore(key, member) }

func (e *env) envelope(hash, id string) (scripts.Envelope, bool) {
	e.t.Helper()
	return e.Envelope(hash, id)
}

// counts sums, over every slot of a topic, the sizes of store, prepare,
// msg, dead and deadmsg.
type counts = rmqtest.Counts

func (e *env) counts(tp topic.Topic) counts { e.t.Helper(); return e.Counts(tp) }

// eventuallyCounts waits until the topic's counts are want.
func (e *env) eventuallyCounts(tp topic.Topic, want counts) {
	e.t.Helper()
	e.EventuallyCounts(tp, want)
}

// eventuallyCountsAre waits until ok holds for the topic's counts; want
// describes ok in the failure message.
func (e *env) eventuallyCountsAre(tp topic.Topic, ok func(counts) bool, want string) {
	e.t.Helper()
	e.EventuallyCountsAre(tp, ok, want)
}

func (e *env) keysNow() []string { e.t.Helper(); return e.KeysNow() }

func (e *env) dump() map[string]string { e.t.Helper(); return e.Dump() }

// prepareToken splits a prepare score into its deadline (Unix seconds) and
// the delivery token.
func prepareToken(score float64) (deadline int64, token int64) {
	return scripts.SplitPrepareScore(score)
}

// ---- counting script calls ----------------------------------------------

// clientCountingFetches returns a client on a Redis connection of its own
// whose fetch.lua calls are counted.
func (e *env) clientCountingFetches() (*rmq.Client, *rmqtest.ScriptCounter) {
	e.t.Helper()
	rdb := e.newRedis()
	fetches := rmqtest.NewScriptCounter(scripts.Fetch)
	rdb.AddHook(redistest.Observer{Before: fetches.Observe})
	return e.clientOn(rdb), fetches
}

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
	return rmqtest.Producer(t, rdb, prefix)
}
