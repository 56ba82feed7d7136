package rmq_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// schedWorkerEnv selects the scheduler worker role of this test binary
// (TestMain): a client that only schedules, under the prefix and on the
// Redis of the worker variables of kill_test.go, until it is killed.
const schedWorkerEnv = "RMQ_TEST_SCHED_WORKER"

func runSchedWorker() int {
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(os.Getenv(workerPrefixEnv)), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	fmt.Println("started")
	select {} // until killed (SIGKILL): the client's timers keep the runtime from calling this a deadlock
}

// startSchedWorker starts a scheduler in a child process and returns a
// function that kills it with SIGKILL.
func startSchedWorker(t *testing.T, e *env) (kill func()) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		schedWorkerEnv+"=1",
		workerAddrEnv+"="+e.addrs(),
		workerClusterEnv+"="+map[bool]string{false: "0", true: "1"}[e.cl != nil],
		workerPrefixEnv+"="+e.prefix,
	)
	stderr := &rmqtest.SyncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := false
	kill = func() {
		if !done {
			done = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("scheduler worker stderr:\n%s", stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("worker: %v\n%s", err, stderr.String())
	}
	require.Equal(t, "started\n", line)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return kill
}

// Four schedulers fire a 1 s schedule; mid-run two are closed and one, in
// a child process, is killed with SIGKILL: no tick is missed or doubled.
func TestScheduleFleetLosesMembers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "departures", topic.FixedTime, 2)
		rec := newRecorder(nil)
		// The consumer schedules too: it is the one that stays.
		stays := e.client()
		require.NoError(t, stays.Register(tp, rec))
		e.start(stays)
		a, b := e.client(), e.client()
		e.start(a)
		e.start(b)
		kill := startSchedWorker(t, e)

		s := a.Schedules()
		require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "beat", Spec: "@every 1s", Topic: tp, Body: []byte("b")}))
		info, err := s.Get(ctx, "beat")
		require.NoError(t, err)
		first := info.Next

		var ds []delivery
		ds = append(ds, collect(rec, first.Add(2500*time.Millisecond))...)
		closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(t, a.Close(closeCtx))
		ds = append(ds, collect(rec, first.Add(4700*time.Millisecond))...)
		kill()
		ds = append(ds, collect(rec, first.Add(6900*time.Millisecond))...)
		require.NoError(t, b.Close(closeCtx))
		cancel()
		ds = append(ds, collect(rec, first.Add(10*time.Second+time.Second))...)

		ticks := checkTicks(t, "beat", ds, time.Second)
		require.NotEmpty(t, ticks)
		assert.Equal(t, first.UnixMilli(), ticks[0])
		assert.GreaterOrEqual(t, len(ticks), 11, "ticks %v", ticks)
		info, err = stays.Schedules().Get(ctx, "beat")
		require.NoError(t, err)
		assert.Zero(t, info.Skipped)
	})
}

// Pause, Resume, Remove and a new Set, made through one client, take
// effect at the next tick in every client: no tick after the call follows
// the old definition.
func TestScheduleChangesReachEveryClient(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "changes", topic.FixedTime, 4)
		rec := newRecorder(nil)
		c1, c2 := e.client(), e.client()
		require.NoError(t, c1.Register(tp, rec))
		require.NoError(t, c2.Register(tp, rec))
		e.start(c1)
		e.start(c2)
		s1, s2 := c1.Schedules(), c2.Schedules()
		set := func(s *rmq.Schedules, body string) {
			require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "job", Spec: "@every 1s", Topic: tp, Body: []byte(body)}))
		}
		set(s1, "v1")
		checkTicks(t, "job", rec.nextN(t, 2, waitLong), time.Second)

		// Pause: nothing due after the call is delivered.
		require.NoError(t, s2.Pause(ctx, "job"))
		paused := time.Now()
		for _, d := range collect(rec, paused.Add(2500*time.Millisecond)) {
			assert.False(t, d.DueAt.After(paused), "tick %s due after the pause at %v", d.ID, paused.Format("15:04:05.000"))
		}
		info, err := s1.Get(ctx, "job")
		require.NoError(t, err)
		assert.True(t, info.Paused)
		assert.True(t, info.Next.IsZero())
		assert.NoError(t, s1.Pause(ctx, "job"), "pausing twice")

		// Resume: from the next tick after now, nothing caught up.
		resumed := time.Now()
		require.NoError(t, s1.Resume(ctx, "job"))
		ds := rec.nextN(t, 2, waitLong)
		checkTicks(t, "job", ds, time.Second)
		assert.True(t, ds[0].DueAt.After(resumed), "tick %v from before the resume at %v", ds[0].DueAt, resumed)
		assert.Less(t, ds[0].DueAt.Sub(resumed), 2*time.Second)
		info, err = s2.Get(ctx, "job")
		require.NoError(t, err)
		assert.Zero(t, info.Skipped, "paused ticks are not missed ones")

		// A new Set: every tick after it has the new body.
		set(s2, "v2")
		changed := time.Now()
		for _, d := range collect(rec, changed.Add(2500*time.Millisecond)) {
			if d.DueAt.After(changed) {
				assert.Equal(t, "v2", d.Body, "tick %s after the change", d.ID)
			}
		}

		// Remove: nothing due after it.
		require.NoError(t, s1.Remove(ctx, "job"))
		removed := time.Now()
		for _, d := range collect(rec, removed.Add(2500*time.Millisecond)) {
			assert.False(t, d.DueAt.After(removed), "tick %s due after the remove", d.ID)
		}
		_, err = s2.Get(ctx, "job")
		assert.ErrorIs(t, err, rmq.ErrScheduleNotFound)
		list, err := s2.List(ctx)
		require.NoError(t, err)
		assert.Empty(t, list)

		// Set again, and onto another topic: the ticks move with it.
		other := mustTopic(t, "changes-moved", topic.FixedTime, 1)
		rec2 := newRecorder(nil)
		c3 := e.client()
		require.NoError(t, c3.Register(other, rec2))
		e.start(c3)
		set(s2, "v3")
		checkTicks(t, "job", rec.nextN(t, 1, waitLong), time.Second)
		require.NoError(t, s1.Set(ctx, rmq.Schedule{Name: "job", Spec: "@every 1s", Topic: other, Body: []byte("v4")}))
		moved := time.Now()
		for _, d := range collect(rec, moved.Add(2500*time.Millisecond)) {
			assert.False(t, d.DueAt.After(moved), "tick %s on the old topic after the move", d.ID)
		}
		ds = rec2.nextN(t, 2, waitLong)
		assert.Equal(t, "v4", ds[0].Body)
		info, err = s1.Get(ctx, "job")
		require.NoError(t, err)
		assert.Equal(t, other.Name(), info.Topic.Name())
	})
}
