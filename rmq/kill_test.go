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

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The worker role of this test binary (see TestMain).
const (
	workerEnv        = "RMQ_TEST_WORKER"
	workerAddrEnv    = "RMQ_TEST_WORKER_ADDR" // comma-separated: every node of a cluster
	workerClusterEnv = "RMQ_TEST_WORKER_CLUSTER"
	workerPrefixEnv  = "RMQ_TEST_WORKER_PREFIX"
	workerTopicEnv   = "RMQ_TEST_WORKER_TOPIC"
	// workerLookaheadEnv, when set, is the worker's consumer.WithLookahead.
	workerLookaheadEnv = "RMQ_TEST_WORKER_LOOKAHEAD"
)

// runWorker consumes one fixed-time topic with a 1 s lease; its handler
// prints "got <id>" and then blocks forever, so the process dies holding the
// message when the parent kills it.
func runWorker() int {
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	tp, err := topic.New(os.Getenv(workerTopicEnv), topic.FixedTime, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(os.Getenv(workerPrefixEnv)), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	opts := []consumer.Option{consumer.WithPrepareTimeout(time.Second)}
	if v := os.Getenv(workerLookaheadEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
		opts = append(opts, consumer.WithLookahead(d))
	}
	err = c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		fmt.Printf("got %s\n", m.ID)
		select {}
	}), opts...)
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
	select {} // until killed (SIGKILL): the client's timers keep the runtime from calling this a deadlock
}

// A consumer process killed with SIGKILL while it holds a message: once the
// lease runs out another consumer's sweeper rolls it back and the message is
// delivered again, with the failed attempt counted.
func TestKilledConsumerMessageRedelivered(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "killed", topic.FixedTime, 1)
		_, err := e.client().Producer().SendFixedTime(ctx, tp, []byte("work"), time.Now(), producer.WithKey("job-1"))
		require.NoError(t, err)

		exe, err := os.Executable()
		require.NoError(t, err)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(),
			workerEnv+"=1",
			workerAddrEnv+"="+e.addrs(),
			workerClusterEnv+"="+map[bool]string{false: "0", true: "1"}[e.cl != nil],
			workerPrefixEnv+"="+e.prefix,
			workerTopicEnv+"="+tp.Name(),
		)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		waited := false
		t.Cleanup(func() {
			if !waited {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if t.Failed() {
				t.Logf("worker stderr:\n%s", stderr.String())
			}
		})

		lines := make(chan string, 4)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
			_, _ = io.Copy(io.Discard, stdout)
		}()
		select {
		case line, ok := <-lines:
			require.True(t, ok, "worker exited without handling the message")
			require.Equal(t, "got job-1", line)
		case <-time.After(30 * time.Second):
			t.Fatal("worker did not get the message")
		}
		k := e.keys(tp, 0)
		_, inPrepare := e.zscore(k.Prepare, "job-1")
		require.True(t, inPrepare, "the worker's delivery is not in prepare")

		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		waited = true
		killed := time.Now()

		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithSweepInterval(200*time.Millisecond)))
		e.start(c)
		d := rec.next(t, 10*time.Second)
		t.Logf("redelivered %v after the kill", time.Since(killed))
		assert.Equal(t, "job-1", d.ID)
		assert.Equal(t, 2, d.Attempt)
		assert.Equal(t, "rmq: lease expired", d.LastError)
		assert.Equal(t, "work", d.Body)
		rec.drained(t, e, tp, counts{})
	})
}
