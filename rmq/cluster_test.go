package rmq_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Every script, called by the library's own code on a cluster (producer,
// consumer with its sweeper and lease keeper, inspector, ZooKeeper mode),
// names keys of one hash slot only: the env's hook checks each call, and
// this test makes sure every script of luascripts was among them.
func TestClusterEveryScriptKeysOneHashSlot(t *testing.T) {
	t.Parallel()
	e := newEnvFor(t, cluster)
	ctx := ctxT(t)
	tp := mustTopic(t, "allscripts", topic.FixedTime, 8)

	// Sends (single and batched), remove.
	c := e.client()
	p := c.Producer()
	_, err := p.SendFixedTime(ctx, tp, []byte("gone"), time.Now().Add(time.Hour), producer.WithKey("gone"))
	require.NoError(t, err)
	removed, err := p.Remove(ctx, tp, "gone")
	require.NoError(t, err)
	require.Equal(t, producer.RemovedWaiting, removed)
	var batch []producer.BatchMessage
	for i := range 16 {
		batch = append(batch, producer.BatchMessage{Body: []byte(fmt.Sprintf("b%d", i)), Key: fmt.Sprintf("b%d", i), At: time.Now()})
	}

	// Fetch, ack, rollback (to dead), lease extension.
	rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
		switch {
		case strings.HasPrefix(m.ID, "fail"):
			return fmt.Errorf("fails")
		case m.ID == "slow":
			// Its progress stored (progress.lua), then handled until the
			// lease keeper extended its lease (the only delivery in flight
			// for that long).
			assert.NoError(t, m.SetProgress(ctx, []byte("half")))
			assert.Eventually(t, func() bool { return slices.Contains(e.scripts.Seen(), scripts.NameExtend) },
				waitLong, 10*time.Millisecond, "no lease extension")
		}
		return nil
	})
	require.NoError(t, c.Register(tp, rec, consumer.WithMaxRetries(0), consumer.WithPrepareTimeout(time.Second),
		consumer.WithSweepInterval(200*time.Millisecond)))
	e.start(c)
	_, err = p.SendBatch(ctx, tp, batch)
	require.NoError(t, err)
	for _, k := range []string{"fail-1", "fail-2", "slow"} {
		_, err = p.SendFixedTime(ctx, tp, []byte(k), time.Now(), producer.WithKey(k))
		require.NoError(t, err)
	}
	rec.nextN(t, len(batch)+3, waitLong)
	e.eventuallyCounts(tp, counts{Dead: 2, DeadMsg: 2})

	// Sweep: a delivery whose consumer vanished (fetched with a 1 s lease
	// and never ended) is rolled back by the running consumer's sweeper.
	_, err = p.SendFixedTime(ctx, tp, []byte("orphan"), time.Now().Add(time.Hour), producer.WithKey("orphan"))
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "orphan"))
	// Due now, then fetched by hand with a 1 s lease.
	require.NoError(t, e.rdb.ZAdd(ctx, k.Store, redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "orphan"}).Err())
	// (The consumer's fetcher does not know: no wake-up was published.)
	r := fetchDirect(t, e.rdb, k, true, 1, 1)
	require.Len(t, r.Msgs, 1, "the orphan was not fetched")
	e.eventuallyCounts(tp, counts{Dead: 3, DeadMsg: 3})

	// Inspector: requeue one dead message, delete the others.
	insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	n, err := insp.Requeue(ctx, tp, "fail-1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	e.eventuallyCounts(tp, counts{Dead: 3, DeadMsg: 3}) // it fails again
	n, err = insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = insp.DeleteDead(ctx, tp, "nobody")
	require.NoError(t, err)
	require.Zero(t, n)

	// ZooKeeper mode: takeover and fenced calls.
	zk := e.zkClient(startZK(t))
	ztp := mustTopic(t, "allscripts-zk", topic.FixedTime, 4)
	zrec := newRecorder(nil)
	require.NoError(t, zk.Register(ztp, zrec))
	e.start(zk)
	_, err = zk.Producer().SendFixedTime(ctx, ztp, []byte("z"), time.Now(), producer.WithKey("z"))
	require.NoError(t, err)
	zrec.next(t, waitLong)
	e.eventuallyCounts(ztp, counts{})

	// Flow control: grouped sends (gsend), grouped fetches under group
	// places and a topic concurrency, whose permits a cluster keeps on the
	// topic's own node (permit), and a grouped message removed where it
	// waits (gremove).
	fc := e.client()
	ftp := mustTopic(t, "allscripts-flow", topic.FixedTime, 4)
	frec := newRecorder(nil)
	require.NoError(t, fc.Register(ftp, frec, consumer.WithGroupConcurrency(1), consumer.WithGlobalConcurrency(3)))
	e.start(fc)
	for j := range 6 {
		_, err = p.SendFixedTime(ctx, ftp, []byte(fmt.Sprintf("g%d", j)), time.Now(), producer.WithGroup(fmt.Sprintf("tenant-%d", j%3)))
		require.NoError(t, err)
	}
	frec.nextN(t, 6, waitLong)
	_, err = p.SendFixedTime(ctx, ftp, []byte("later"), time.Now().Add(time.Hour), producer.WithGroup("tenant-9"), producer.WithKey("later"))
	require.NoError(t, err)
	gone, err := p.Remove(ctx, ftp, "later", producer.WithGroup("tenant-9"))
	require.NoError(t, err)
	require.Equal(t, producer.RemovedWaiting, gone)
	// Cancel (cancel.lua) of a grouped waiting message, with the group keys.
	_, err = p.SendFixedTime(ctx, ftp, []byte("cancelled"), time.Now().Add(time.Hour), producer.WithGroup("tenant-9"), producer.WithKey("cancelled"))
	require.NoError(t, err)
	cancelled, err := fc.Inspector().Cancel(ctx, ftp, "cancelled")
	require.NoError(t, err)
	require.True(t, cancelled)
	// Flows: grouped nodes written (flowstage, flowact), a child's report
	// that releases its parent into its group (flowrec), a check of a
	// child's end (flowcheck), a waiting parent cancelled (flowend).
	_, err = p.SendFlow(ctx, producer.FlowNode{Topic: ftp, Body: []byte("fp"), Options: []producer.SendOption{producer.WithKey("fp"), producer.WithGroup("tenant-7")},
		Children: []producer.FlowNode{{Topic: ftp, Body: []byte("fk"), Options: []producer.SendOption{producer.WithKey("fk"), producer.WithGroup("tenant-8")}}}})
	require.NoError(t, err)
	frec.nextN(t, 2, waitLong)
	_, err = p.SendFlow(ctx, producer.FlowNode{Topic: ftp, Body: []byte("fq"), Options: key("fq"),
		Children: []producer.FlowNode{{Topic: ftp, Body: []byte("fl"), Options: key("fl"), DueAt: time.Now().Add(time.Hour)}}})
	require.NoError(t, err)
	require.NoError(t, flowtree.NewReporter(e.rdb, e.prefix).Check(ctx, ftp.Name(), slotOfKey(ftp, "fl"), "fl"))
	cancelled, err = fc.Inspector().Cancel(ctx, ftp, "fq")
	require.NoError(t, err)
	require.True(t, cancelled)
	require.NoError(t, fc.Close(ctx))

	// Confirm and release serve lookahead fetches, which a cluster does
	// not make (WithLookahead): called by hand on one slot, each a no-op
	// for a delivery that is not there.
	hk := e.keys(tp, 0)
	hgroups := []scripts.HeldGroup{{Store: hk.Store, Prepare: hk.Prepare, Msg: hk.Msg, Wake: hk.Wake, Items: []scripts.HeldItem{{ID: "nobody", Token: scripts.HeldToken + 1, Score: 1}}}}
	hkeys, hargs := scripts.ConfirmArgs(hgroups)
	vals, err := scripts.Confirm.Run(ctx, e.rdb, hkeys, hargs...).Slice()
	require.NoError(t, err)
	cr, err := scripts.ParseConfirmReply(vals, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{scripts.HeldGone}, cr.Codes)
	hkeys, hargs = scripts.ReleaseArgs("SPUBLISH", hgroups)
	codes, err := scripts.Release.Run(ctx, e.rdb, hkeys, hargs...).Int64Slice()
	require.NoError(t, err)
	require.Equal(t, []int64{0}, codes)

	// Schedules: one set, triggered and removed (schedule.lua).
	sch := c.Schedules()
	require.NoError(t, sch.Set(ctx, rmq.Schedule{Name: "all", Spec: "@hourly", Topic: mustTopic(t, "allscripts-sched", topic.FixedTime, 2), Body: []byte("s")}))
	_, err = sch.Trigger(ctx, "all")
	require.NoError(t, err)
	require.NoError(t, sch.Remove(ctx, "all"))

	require.NoError(t, c.Close(ctx))
	require.NoError(t, zk.Close(ctx))
	seen := e.scripts.Seen()
	for _, name := range scripts.Names() {
		assert.Contains(t, seen, name, "script %s was never called", name)
	}
	t.Logf("scripts called: %v", seen)
}

// slotMap returns, for every hash slot, the master that serves it.
func slotMap(t *testing.T, cc *redis.ClusterClient) []string {
	t.Helper()
	shards, err := cc.ClusterShards(context.Background()).Result()
	require.NoError(t, err)
	owner := make([]string, keyspace.NumHashSlots)
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" {
				continue
			}
			for _, r := range sh.Slots {
				for hs := r.Start; hs <= r.End; hs++ {
					owner[hs] = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	return owner
}

// The keys' hash slots are the ones Redis computes (CLUSTER KEYSLOT), and
// on the shared cluster (`redis-cli --cluster create`, three masters) the
// slots of topics of 16, 64 and 256 slots spread evenly: each master holds
// its share within one. The log shows the counts next to those that plain
// "{topic:index}" tags would give.
func TestClusterKeyPlacement(t *testing.T) {
	t.Parallel()
	e := newEnvFor(t, cluster)
	ctx := ctxT(t)
	cc := e.rdb.(*redis.ClusterClient)
	owner := slotMap(t, cc)
	masters := slices.Compact(slices.Sorted(slices.Values(owner)))
	require.Len(t, masters, 3)

	keySlots := func(keys []string) []int {
		pipe := cc.Pipeline()
		cmds := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.ClusterKeySlot(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		out := make([]int, len(keys))
		for i, c := range cmds {
			out[i] = int(c.Val())
		}
		return out
	}
	count := func(keys []string) []int {
		per := map[string]int{}
		for _, hs := range keySlots(keys) {
			per[owner[hs]]++
		}
		out := make([]int, len(masters))
		for i, m := range masters {
			out[i] = per[m]
		}
		return out
	}
	for _, name := range []string{"orders", "prices", "jobs", "orders.v1", "t"} {
		for _, n := range []int{16, 64, 256} {
			tp := mustTopic(t, name, topic.FixedTime, n)
			var placed, plain []string
			for i := range n {
				k := keyspace.KeysFor(e.prefix, tp, i)
				placed = append(placed, k.Store)
				plain = append(plain, e.prefix+":{"+name+":"+strconv.Itoa(i)+"}:store")
			}
			for i, hs := range keySlots(placed) {
				require.Equal(t, keyspace.HashSlot(placed[i]), hs, placed[i])
			}
			got, before := count(placed), count(plain)
			t.Logf("%-9s %3d slots over %v: placed tags %v, plain tags %v", name, n, masters, got, before)
			assert.LessOrEqual(t, slices.Max(got)-slices.Min(got), 1, "%s with %d slots: %v", name, n, got)
		}
	}
}

// probeWakeUps sends to every slot of tp a message due now while its
// consumer idles, and requires each handled within a second: only a wake-up
// on the slot's sharded channel brings an idle fetcher that fast.
func probeWakeUps(t *testing.T, e *env, tp topic.Topic) {
	t.Helper()
	ctx := ctxT(t)
	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	e.waitFetchersAsleep(1) // the earlier clients of e are closed
	for s := range tp.SlotAmount() {
		id := fmt.Sprintf("probe-%d", s)
		sent := time.Now()
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte(id), sent, producer.WithKey(id), producer.WithSlotBasis([]byte(keyInSlot(tp, s))))
		require.NoError(t, err)
		d := rec.next(t, waitLong)
		require.Equal(t, id, d.ID)
		assert.Less(t, d.At.Sub(sent), time.Second, "slot %d (hash slot %d) woken late", s, keyspace.HashSlot(e.keys(tp, s).Wake))
	}
	require.NoError(t, c.Close(ctx))
}

// keyInSlot returns a key whose topic slot is slot.
func keyInSlot(tp topic.Topic, slot int) string { return keyWithPrefixInSlot(tp, "k", slot) }

// keyWithPrefixInSlot returns a key starting with prefix whose topic slot
// is slot.
func keyWithPrefixInSlot(tp topic.Topic, prefix string, slot int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s%d", prefix, i); slotOfKey(tp, k) == slot {
			return k
		}
	}
}

// mastersOf returns the masters serving the slots of tp, each with the
// topic slots it serves.
func mastersOf(t *testing.T, e *env, tp topic.Topic) map[string][]int {
	t.Helper()
	owner := slotMap(t, e.rdb.(*redis.ClusterClient))
	out := map[string][]int{}
	for s := range tp.SlotAmount() {
		m := owner[keyspace.HashSlot(e.keys(tp, s).Store)]
		out[m] = append(out[m], s)
	}
	return out
}

// noScriptCounter counts NOSCRIPT replies per script.
type noScriptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *noScriptCounter) observe(cmd redis.Cmder) {
	if !scripts.IsNoScript(cmd.Err()) {
		return
	}
	name := rmqtest.ScriptName(fmt.Sprint(cmd.Args()[1]))
	h.mu.Lock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[name]++
	h.mu.Unlock()
}
func (h *noScriptCounter) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

// scriptsOn reports whether every script is loaded on the node at addr.
func scriptsOn(t *testing.T, addr string) bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rdb.Close()
	ok, err := rdb.ScriptExists(context.Background(), rmqtest.ScriptSHAs()...).Result()
	require.NoError(t, err)
	return !slices.Contains(ok, false)
}

// A manual failover (CLUSTER FAILOVER on a replica) of a master that holds
// topic slots, during a run of sends and deliveries: every acknowledged
// send is handled, nothing stays in prepare, and afterwards every slot is
// woken at once (the consumer re-subscribed its sharded channels on the new
// master). Then the scripts: a promoted replica has none loaded, and the
// producer's and the inspector's pipelined calls (EVALSHA, which does not
// fall back to EVAL) load them on the right node and go through.
func TestClusterFailoverLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	t.Parallel()
	e := newClusterEnvOn(t, redistest.StartCluster(t, redisserver.ClusterConfig{}))
	noScript := &noScriptCounter{}
	e.rdb.AddHook(redistest.Observer{After: noScript.observe})
	ctx := ctxT(t)
	tp := mustTopic(t, "failover", topic.FixedTime, 16)
	byMaster := mastersOf(t, e, tp)
	require.Len(t, byMaster, 3, "the topic's slots span the three masters")

	run := startFaultRun(t, e, tp)
	run.waitHandled(t, 200) // the failover hits a running load
	var victim string
	for m := range byMaster {
		victim = m
		break
	}
	began := time.Now()
	promoted, err := e.cl.Failover(ctx, victim)
	require.NoError(t, err)
	t.Logf("failover of %s (topic slots %v) to %s took %v", victim, byMaster[victim], promoted, time.Since(began))
	run.waitHandled(t, 200) // traffic flows again after it
	run.finish(t)
	require.NoError(t, run.c.Close(ctx))
	probeWakeUps(t, e, tp)
	e.eventuallyCounts(tp, counts{})

	// Scripts after a failover: nothing runs while a second master is
	// failed over, so its promoted replica has no script loaded.
	byMaster = mastersOf(t, e, tp)
	for m := range byMaster {
		if m != promoted {
			victim = m
			break
		}
	}
	promoted2, err := e.cl.Failover(ctx, victim)
	require.NoError(t, err)
	require.False(t, scriptsOn(t, promoted2), "a promoted replica has the scripts already")
	p := producerOn(t, e.rdb, e.prefix)
	var batch []producer.BatchMessage
	for s := range tp.SlotAmount() {
		k := keyInSlot(tp, s)
		batch = append(batch, producer.BatchMessage{Body: []byte(k), Key: k, At: time.Now()})
	}
	_, err = p.SendBatch(ctx, tp, batch)
	require.NoError(t, err, "pipelined sends after a failover")
	// One message per slot: each slot's call is send1.lua's.
	assert.Positive(t, noScript.count("send1")+noScript.count("sendbatch"), "the batch never met NOSCRIPT")
	assert.True(t, scriptsOn(t, promoted2), "the scripts were not loaded on the new master")
	require.Equal(t, counts{Store: int64(len(batch)), Msg: int64(len(batch))}, e.counts(tp))

	// The inspector's pipelined requeue after a third failover.
	makeDead := e.client()
	require.NoError(t, makeDead.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		return fmt.Errorf("to the dead queue")
	}), consumer.WithMaxRetries(0)))
	e.start(makeDead)
	e.eventuallyCounts(tp, counts{Dead: int64(len(batch)), DeadMsg: int64(len(batch))})
	require.NoError(t, makeDead.Close(ctx))
	byMaster = mastersOf(t, e, tp)
	for m := range byMaster {
		if m != promoted && m != promoted2 {
			victim = m
		}
	}
	promoted3, err := e.cl.Failover(ctx, victim)
	require.NoError(t, err)
	require.False(t, scriptsOn(t, promoted3))
	n, err := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix)).RequeueAll(ctx, tp)
	require.NoError(t, err, "pipelined requeue after a failover")
	assert.Equal(t, len(batch), n)
	assert.Positive(t, noScript.count("requeue"), "the requeue never met NOSCRIPT")
	e.eventuallyCounts(tp, counts{Store: int64(len(batch)), Msg: int64(len(batch))})
	probeWakeUpsDrain(t, e, tp, len(batch))
}

// probeWakeUpsDrain consumes the n waiting messages of tp.
func probeWakeUpsDrain(t *testing.T, e *env, tp topic.Topic, n int) {
	t.Helper()
	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	rec.nextN(t, n, waitLong)
	e.eventuallyCounts(tp, counts{})
}

// redirects counts the MOVED, ASK and TRYAGAIN replies the node clients of
// a cluster client see (the cluster client follows them quietly).
type redirects struct{ moved, ask, tryAgain atomic.Int64 }

func (r *redirects) observe(err error) {
	if err == nil {
		return
	}
	switch s := err.Error(); {
	case strings.HasPrefix(s, "MOVED "):
		r.moved.Add(1)
	case strings.HasPrefix(s, "ASK "):
		r.ask.Add(1)
	case strings.HasPrefix(s, "TRYAGAIN"):
		r.tryAgain.Add(1)
	}
}

// Resharding during a run: the hash slots of four topic slots move to other
// masters (MoveSlot: IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE)
// while messages are sent and handled, and while others wait in those very
// slots for a due time after the move. Each moved hash slot also holds 200
// keys of another application, so its migration takes several batches and
// clients meet ASK and TRYAGAIN, not only MOVED. Nothing is lost, nothing
// stays in prepare, and the moved slots are woken at once afterwards.
func TestClusterReshardLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	t.Parallel()
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{})
	e := newClusterEnvOn(t, cl)
	var redir redirects
	rdb := redistest.ClusterClient(t, cl, func(o *redis.ClusterOptions) {
		o.NewClient = func(opt *redis.Options) *redis.Client {
			nc := redis.NewClient(opt)
			nc.AddHook(redistest.Observer{After: func(c redis.Cmder) { redir.observe(c.Err()) }})
			return nc
		}
	})
	rdb.AddHook(redistest.Observer{Before: e.scripts.Observe})
	e.RDB, e.rdb = rdb, rdb // the client e.client() uses, and its short name
	ctx := ctxT(t)
	tp := mustTopic(t, "reshard", topic.FixedTime, 16)
	moving := []int{1, 6, 11, 14}

	// Filler keys of another application in the hash slots that move.
	for _, s := range moving {
		tag := keyspace.Tag(tp.Name(), s)
		pipe := e.rdb.Pipeline()
		for i := range 200 {
			pipe.Set(ctx, fmt.Sprintf("other:%s:%d", tag, i), "x", time.Hour)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
	}
	// Messages waiting in the moving slots, due once the moves are done.
	p := producerOn(t, e.rdb, e.prefix)
	waitingDue := time.Now().Add(4 * time.Second)
	var waiting []string
	for _, s := range moving {
		for j := range 10 {
			id := fmt.Sprintf("waiting-%d-%d", s, j)
			_, err := p.SendFixedTime(ctx, tp, []byte(id), waitingDue, producer.WithKey(id), producer.WithSlotBasis([]byte(keyInSlot(tp, s))))
			require.NoError(t, err)
			waiting = append(waiting, id)
		}
	}

	run := startFaultRun(t, e, tp)
	// finish waits for the waiting messages too, once they come due.
	run.mu.Lock()
	for _, id := range waiting {
		run.acked[id] = true
	}
	run.mu.Unlock()
	masters := cl.MasterAddrs()
	run.waitHandled(t, 50) // the moves hit a running load
	began := time.Now()
	for _, s := range moving {
		hs := keyspace.HashSlot(e.keys(tp, s).Store)
		from, err := cl.SlotOwner(ctx, hs)
		require.NoError(t, err)
		to := masters[(slices.Index(masters, from)+1)%len(masters)]
		require.NoError(t, cl.MoveSlot(ctx, hs, to))
		t.Logf("topic slot %d (hash slot %d) moved from %s to %s", s, hs, from, to)
	}
	t.Logf("4 hash slots moved in %v; redirects: %d MOVED, %d ASK, %d TRYAGAIN",
		time.Since(began), redir.moved.Load(), redir.ask.Load(), redir.tryAgain.Load())
	run.waitHandled(t, 200) // traffic flows after the moves
	run.finish(t)
	require.NoError(t, run.c.Close(ctx))
	probeWakeUps(t, e, tp)
	e.eventuallyCounts(tp, counts{})
	assert.Positive(t, redir.moved.Load()+redir.ask.Load()+redir.tryAgain.Load(), "no client met a redirection")
	for _, s := range moving {
		n, err := e.rdb.Exists(ctx, fmt.Sprintf("other:%s:%d", keyspace.Tag(tp.Name(), s), 7)).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "a filler key was lost")
	}
}

// The scripts publish wake-ups with SPUBLISH from inside the script, the
// channel passed in KEYS with the slot's tag: Redis 7.0 accepts that, and the
// notification reaches a sharded subscriber on the slot's master.
func TestClusterScriptsPublishSharded(t *testing.T) {
	t.Parallel()
	e := newEnvFor(t, cluster)
	ctx := ctxT(t)
	cc := e.rdb.(*redis.ClusterClient)
	tp := mustTopic(t, "spublish", topic.FixedTime, 4)
	for s := range tp.SlotAmount() {
		k := e.keys(tp, s)
		node, err := cc.MasterForKey(ctx, k.Wake)
		require.NoError(t, err)
		ps := node.SSubscribe(ctx, k.Wake)
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, &redis.Subscription{Kind: "ssubscribe", Channel: k.Wake, Count: 1}, msg)

		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		key := keyInSlot(tp, s)
		_, err = producerOn(t, cc, e.prefix).SendFixedTime(ctx, tp, []byte("x"), at, producer.WithKey(key))
		require.NoError(t, err)
		msg, err = ps.ReceiveTimeout(ctx, 5*time.Second)
		require.NoError(t, err, "no wake-up on the sharded channel of slot %d", s)
		require.Equal(t, &redis.Message{Channel: k.Wake, Payload: strconv.FormatInt(at.UnixMilli(), 10)}, msg)
		require.NoError(t, ps.Close())
	}
}
