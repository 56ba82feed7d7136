package rmq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The life tests' worker role of this test binary (TestMain): a consumer
// of one fixed-time topic in a process of its own, whose handler does what
// each message's body says:
//
//	ok:TEXT   sets the result TEXT and returns nil
//	fail      returns an error
//	block     prints "R <id>", waits for its context to end, prints
//	          "C <id> <context.Cause is rmq.ErrCancelled>" and returns nil
//	          (a late ack)
//
// and which prints "F <id> <outcome>" when a delivery ended (its
// observer's Finished).
const (
	lifeWorkerRole  = "life"
	lifeWorkerSlots = "RMQ_LIFE_SLOTS"
)

// lifeWorkerObserver prints each delivery's outcome.
type lifeWorkerObserver struct{ mu *sync.Mutex }

func (lifeWorkerObserver) Sent(topic.Topic, producer.SendResult) {}
func (lifeWorkerObserver) Removed(topic.Topic, bool)             {}
func (lifeWorkerObserver) Delivered(*consumer.Message)           {}
func (lifeWorkerObserver) LeasesExpired(string, int, int)        {}
func (o lifeWorkerObserver) Finished(m *consumer.Message, _ time.Duration, out consumer.Outcome, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf("F %s %s\n", m.ID, out)
}

// runLifeWorker is the life worker role (TestMain).
func runLifeWorker() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "life worker:", err); return 2 }
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	n, _ := strconv.Atoi(os.Getenv(lifeWorkerSlots))
	tp, err := topic.New(os.Getenv(workerTopicEnv), topic.FixedTime, n)
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex // one line at a time on stdout
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(os.Getenv(workerPrefixEnv)), rmq.WithObserver(lifeWorkerObserver{&mu}),
		rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		return fail(err)
	}
	err = c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		body := string(m.Body)
		switch {
		case strings.HasPrefix(body, "ok:"):
			return m.SetResult([]byte(strings.TrimPrefix(body, "ok:")))
		case body == "block":
			say("R %s", m.ID)
			<-ctx.Done()
			say("C %s %t", m.ID, errors.Is(context.Cause(ctx), rmq.ErrCancelled))
			return nil
		default:
			return errors.New("failed on purpose")
		}
	}), consumer.WithMaxRetries(0), consumer.WithRetention(time.Minute), consumer.WithEvents(10_000))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	say("started")
	// Until the parent closes stdin (or kills it): then a clean Close.
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(context.Background()); err != nil {
		return fail(err)
	}
	return 0
}

// lifeWorker is a running life worker process and the lines it printed.
type lifeWorker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startLifeWorker starts the worker on tp and waits until its consumer runs.
func startLifeWorker(t *testing.T, e *env, tp topic.Topic) *lifeWorker {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+lifeWorkerRole, workerAddrEnv+"="+e.addrs(),
		workerClusterEnv+"="+map[bool]string{false: "0", true: "1"}[e.cl != nil],
		workerPrefixEnv+"="+e.prefix, workerTopicEnv+"="+tp.Name(), lifeWorkerSlots+"="+strconv.Itoa(tp.SlotAmount()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &lifeWorker{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // the worker closes its client and exits
		exited := make(chan error, 1)
		go func() { <-read; exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			assert.NoError(t, err, "the worker's exit")
		case <-time.After(waitLong):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("the worker did not exit")
		}
		if t.Failed() {
			t.Logf("worker stderr:\n%s", stderr.String())
		}
	})
	require.Equal(t, "started", w.next(t))
	return w
}

// next returns the worker's next line.
func (w *lifeWorker) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-w.lines:
		require.True(t, ok, "the worker exited")
		return l
	case <-time.After(waitLong):
		t.Fatal("the worker printed nothing")
		return ""
	}
}

// sendLater sends id to tp, due in an hour: Wait finds it waiting.
func sendLater(t *testing.T, c *rmq.Client, tp topic.Topic, id, body string) {
	t.Helper()
	_, err := c.Producer().SendFixedTime(context.Background(), tp, []byte(body), time.Now().Add(time.Hour), producer.WithKey(id))
	require.NoError(t, err)
}

// Wait in one process for messages finished by a consumer in another:
// each returns its message's end, pushed through Redis: completed with
// the result the other process's handler set, or dead with its error.
// Every Wait is registered before its message is made due, so what it
// returns is the word of the finish, not a read of a finished record.
func TestLifeWaitAcrossProcesses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifeprocs", topic.FixedTime, 4)
		c := e.client() // never started: it only waits
		w := startLifeWorker(t, e, tp)
		const n = 40
		ids, bodies := make([]string, n), make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("w%d", i)
			bodies[i] = "ok:result of " + ids[i]
			if i%10 == 9 {
				bodies[i] = "fail"
			}
			sendLater(t, c, tp, ids[i], bodies[i])
		}
		results := make([]chan waitResult, n)
		for i, id := range ids {
			results[i] = make(chan waitResult, 1)
			go func() {
				m, err := c.Wait(ctx, tp, id)
				results[i] <- waitResult{m, err}
			}()
		}
		rig := &lifeRig{t: t, e: e, tp: tp}
		for _, id := range ids {
			rig.waitRegistered(id, 1)
		}
		for i, id := range ids {
			// The same message again, due now: its time is replaced.
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(bodies[i]), time.Now().Add(-time.Second), producer.WithKey(id))
			require.NoError(t, err)
		}
		for i, id := range ids {
			r := recv(t, results[i])
			if i%10 == 9 {
				require.ErrorIs(t, r.err, rmq.ErrDead, "%s", id)
				assert.Equal(t, rmq.StateDead, r.m.State, "%s", id)
				assert.Equal(t, "failed on purpose", r.m.LastError, "%s", id)
				continue
			}
			require.NoError(t, r.err, "%s", id)
			assert.Equal(t, rmq.StateCompleted, r.m.State, "%s", id)
			assert.Equal(t, "result of "+id, string(r.m.Result), "%s", id)
		}
		finished := map[string]string{}
		for len(finished) < n {
			if l := w.next(t); strings.HasPrefix(l, "F ") {
				f := strings.Fields(l)
				finished[f[1]] = f[2]
			}
		}
		for i, id := range ids {
			want := consumer.Acked.String()
			if i%10 == 9 {
				want = consumer.Dead.String()
			}
			assert.Equal(t, want, finished[id], "%s", id)
		}
	})
}

// Cancel of a handler running in another process: its context ends with
// cause rmq.ErrCancelled, the delivery ends Cancelled although the handler
// returns nil afterwards (its late ack is refused), it is not retried, a
// Wait under way in this process gets ErrCancelled, and the retaining
// topic keeps it as cancelled with no completed event.
func TestLifeCancelAcrossProcesses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifecancel", topic.FixedTime, 2)
		c := e.client()
		w := startLifeWorker(t, e, tp)
		sendLater(t, c, tp, "c1", "block")
		rig := &lifeRig{t: t, e: e, tp: tp, c: c}
		waited := rig.goWait(ctx, "c1")
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("block"), time.Now().Add(-time.Second), producer.WithKey("c1"))
		require.NoError(t, err)
		require.Equal(t, "R c1", w.next(t))
		m, err := c.Inspector().Message(ctx, tp, "c1")
		require.NoError(t, err)
		require.Equal(t, rmq.StateInFlight, m.State)

		ok, err := c.Inspector().Cancel(ctx, tp, "c1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "C c1 true", w.next(t), "the handler's context ends with cause ErrCancelled")
		assert.Equal(t, "F c1 "+consumer.Cancelled.String(), w.next(t), "its late ack is refused")
		r := recv(t, waited)
		require.ErrorIs(t, r.err, rmq.ErrCancelled)

		m, err = c.Inspector().Message(ctx, tp, "c1")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateCancelled, m.State)
		assert.False(t, m.FinishedAt.IsZero())
		// Not retried: nothing of c1 waits, and its log ends cancelled.
		st, err := c.Inspector().Stats(ctx, tp)
		require.NoError(t, err)
		assert.Zero(t, st.Store, "%+v", st)
		assert.Zero(t, st.Dead, "%+v", st)
		var types []string
		for _, l := range e.lifeEvents(tp, "c1") {
			if typ, id, _ := strings.Cut(l, " "); id == "c1" && typ != string(rmq.EventDelivered) && typ != string(rmq.EventSent) {
				types = append(types, typ)
			}
		}
		assert.Equal(t, []string{"cancelled"}, types)
		ok, err = c.Inspector().Cancel(ctx, tp, "c1")
		require.NoError(t, err)
		assert.False(t, ok, "cancelled once")
	})
}
