package rmq_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The flow kill test's worker role of this test binary (TestMain): a
// consumer of the kill test's three topics. A node's handler marks it
// done in the set "<prefix>:t:done" before it returns; a parent's handler
// first checks that all its children are marked (else it pushes its id on
// "<prefix>:t:early") and pushes its id on "<prefix>:t:runs".
const (
	treeWorkerRole = "tree"
	treeKidsEnv    = "RMQ_TREE_KIDS" // "parent=kid,kid;parent=kid..."
)

// The kill test's topics.
var (
	treeRoots = topic.MustNew("kroot", topic.Priority, 4)
	treeMids  = topic.MustNew("kmid", topic.FixedTime, 8)
	treeKids  = topic.MustNew("kkid", topic.FixedTime, 8)
)

func runTreeWorker() int {
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	prefix := os.Getenv(workerPrefixEnv)
	kids := map[string][]string{}
	for _, p := range strings.Split(os.Getenv(treeKidsEnv), ";") {
		if id, ks, ok := strings.Cut(p, "="); ok {
			kids[id] = strings.Split(ks, ",")
		}
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	h := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if ks := kids[m.ID]; len(ks) > 0 {
			in, err := rdb.SMIsMember(ctx, prefix+":t:done", toAny(ks)...).Result()
			if err != nil {
				return err
			}
			for _, ok := range in {
				if !ok {
					rdb.RPush(ctx, prefix+":t:early", m.ID)
				}
			}
			cs, err := m.Children(ctx)
			if err != nil {
				return err
			}
			if len(cs) != len(ks) {
				rdb.RPush(ctx, prefix+":t:early", m.ID+" children "+fmt.Sprint(len(cs)))
			}
			if err := rdb.RPush(ctx, prefix+":t:runs", m.ID).Err(); err != nil {
				return err
			}
		}
		return rdb.SAdd(ctx, prefix+":t:done", m.ID).Err()
	})
	opts := []consumer.Option{consumer.WithPrepareTimeout(time.Second), consumer.WithSweepInterval(200 * time.Millisecond), consumer.WithConcurrency(8)}
	for _, tp := range []topic.Topic{treeRoots, treeMids, treeKids} {
		if err := c.Register(tp, h, opts...); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	fmt.Println("READY")
	select {} // until killed
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// startTreeWorker starts the worker role and waits until it consumes.
func startTreeWorker(t *testing.T, e *env, kids string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cl := "0"
	if e.cl != nil {
		cl = "1"
	}
	cmd.Env = append(os.Environ(), workerEnv+"="+treeWorkerRole, workerAddrEnv+"="+e.addrs(), workerClusterEnv+"="+cl,
		workerPrefixEnv+"="+e.prefix, treeKidsEnv+"="+kids)
	cmd.Stderr = e.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the worker did not start")
	require.Equal(t, "READY", sc.Text())
	return cmd
}

// Consumers killed with SIGKILL mid-flow, again and again, and the Redis
// server killed with SIGKILL and restarted from its AOF: every parent is
// released exactly once (one "released" event each), and none runs
// before all its children finished.
func TestFlowKilledConsumersAndRedis(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	e := newEnvOn(t, srv)
	killedFlows(t, e, func() {
		// Redis itself dies (SIGKILL) and comes back from its AOF.
		require.NoError(t, srv.Kill())
		require.NoError(t, srv.Restart(ctxT(t)))
	})
}

// The same on the cluster, its nodes spread over three masters: consumers
// killed with SIGKILL mid-flow.
func TestFlowKilledConsumersCluster(t *testing.T) {
	killedFlows(t, newEnvFor(t, cluster), func() {})
}

// killedFlows runs 12 flows of three levels over three topics under
// workers killed again and again, calling midway once halfway.
func killedFlows(t *testing.T, e *env, midway func()) {
	ctx := ctxT(t)
	c := e.client()
	for _, tp := range []topic.Topic{treeRoots, treeMids, treeKids} {
		require.NoError(t, c.Inspector().SetLifecycle(ctx, tp, rmq.Lifecycle{Events: 1_000_000}))
	}
	// 12 flows: a root with 3 middle parents of 10 children each.
	var spec []string
	parents := 0
	for f := range 12 {
		root := producer.FlowNode{Topic: treeRoots, Body: []byte("root"), Priority: 100, Options: key(fmt.Sprintf("r%d", f))}
		var mids []string
		for m := range 3 {
			mid := producer.FlowNode{Topic: treeMids, Body: []byte("mid"), Options: key(fmt.Sprintf("m%d-%d", f, m))}
			var ks []string
			for k := range 10 {
				id := fmt.Sprintf("k%d-%d-%d", f, m, k)
				ks = append(ks, id)
				mid.Children = append(mid.Children, producer.FlowNode{Topic: treeKids, Body: []byte(id), Options: key(id)})
			}
			spec = append(spec, fmt.Sprintf("m%d-%d=%s", f, m, strings.Join(ks, ",")))
			mids = append(mids, fmt.Sprintf("m%d-%d", f, m))
			root.Children = append(root.Children, mid)
		}
		spec = append(spec, fmt.Sprintf("r%d=%s", f, strings.Join(mids, ",")))
		parents += 4
		_, err := c.Producer().SendFlow(ctx, root)
		require.NoError(t, err)
	}
	kids := strings.Join(spec, ";")
	done := e.prefix + ":t:done"
	progress := func() int64 { return e.rdb.SCard(ctx, done).Val() }
	waitProgress := func(past int64) {
		require.Eventually(t, func() bool { return progress() > past }, waitLong, 5*time.Millisecond)
	}

	// Two workers; kill one (SIGKILL) whenever some more nodes finished,
	// and start another.
	ws := []*exec.Cmd{startTreeWorker(t, e, kids), startTreeWorker(t, e, kids)}
	total := int64(12 * (1 + 3 + 30))
	for i := range 6 {
		n := progress()
		if n >= total-10 {
			break
		}
		waitProgress(n + 15)
		require.NoError(t, ws[i%2].Process.Signal(syscall.SIGKILL))
		_ = ws[i%2].Wait()
		if i == 2 {
			midway()
		}
		ws[i%2] = startTreeWorker(t, e, kids)
	}
	require.Eventually(t, func() bool { return progress() == total }, 2*waitLong, 10*time.Millisecond)

	assert.Empty(t, e.rdb.LRange(ctx, e.prefix+":t:early", 0, -1).Val(), "parents that ran before their children")
	runs := map[string]int{}
	for _, id := range e.rdb.LRange(ctx, e.prefix+":t:runs", 0, -1).Val() {
		runs[id]++
	}
	assert.Len(t, runs, parents, "every parent ran")
	// Released exactly once: one "released" event per parent, over the
	// slots' event logs of both parent topics.
	released := map[string]int{}
	for _, tp := range []topic.Topic{treeRoots, treeMids} {
		for s := range tp.SlotAmount() {
			evs, err := e.rdb.XRange(ctx, keyspace.LifeKeysFor(e.prefix, tp.Name(), s).Events, "-", "+").Result()
			require.NoError(t, err)
			for _, ev := range evs {
				if ev.Values["t"] == "released" {
					released[ev.Values["id"].(string)]++
				}
			}
		}
	}
	assert.Len(t, released, parents)
	for id, n := range released {
		assert.Equal(t, 1, n, "%s released %d times", id, n)
	}
	for id, n := range runs {
		if n > 1 {
			t.Logf("%s ran %d times (a worker died while it ran)", id, n)
		}
	}
}
