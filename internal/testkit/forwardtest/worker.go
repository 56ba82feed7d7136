package forwardtest

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// workerEnv, set in a child's environment, holds its WorkerConfig as JSON.
const workerEnv = "RMQ_FORWARD_TEST_WORKER"

// WorkerConfig tells a worker what to consume and where to forward.
type WorkerConfig struct {
	RedisAddr string
	Prefix    string
	Topic     string // a topic made by Env.Topic
	Broker    string // passed to the test's build function (a URL)
}

// IsWorker reports whether this test binary runs as a worker; TestMain
// then calls RunWorker instead of the tests:
//
//	if forwardtest.IsWorker() { os.Exit(forwardtest.RunWorker(build)) }
func IsWorker() bool { return os.Getenv(workerEnv) != "" }

// RunWorker consumes the configured topic with a 1 s lease and the
// forwarder build returns. After each successful forward it prints
// "confirmed <id>" and blocks for good: the process holds a delivery the
// broker confirmed and RMQ never got the ack of, until the test kills it.
func RunWorker(build func(broker string) (consumer.MessageListener, error)) int {
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	fw, err := build(cfg.Broker)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	tp, err := topic.New(cfg.Topic, topic.FixedTime, 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, DisableIdentity: true})
	c, err := rmq.New(rdb, rmq.WithPrefix(cfg.Prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	block := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if err := fw.OnMessage(ctx, m); err != nil {
			fmt.Fprintf(os.Stderr, "worker: forward %s: %v\n", m.ID, err)
			return err
		}
		fmt.Printf("confirmed %s\n", m.ID)
		select {}
	})
	if err := c.Register(tp, block, consumer.WithPrepareTimeout(time.Second), consumer.WithConcurrency(1)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	time.Sleep(time.Hour) // until killed
	return 3
}

// Worker is a forwarder in a child process.
type Worker struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *rmqtest.SyncBuffer
}

// StartWorker re-executes the test binary as a worker forwarding tp to
// broker; it is killed when the test ends at the latest.
func (e *Env) StartWorker(tp topic.Topic, broker string) *Worker {
	t := e.T
	t.Helper()
	cfg, err := json.Marshal(WorkerConfig{RedisAddr: e.RDB.(*redis.Client).Options().Addr, Prefix: e.Prefix, Topic: tp.Name(), Broker: broker})
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	w := &Worker{cmd: exec.Command(exe), lines: make(chan string, 16), stderr: &rmqtest.SyncBuffer{}}
	w.cmd.Env = append(os.Environ(), workerEnv+"="+string(cfg))
	w.cmd.Stderr = w.stderr
	stdout, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		<-done
		if t.Failed() {
			t.Logf("worker stderr:\n%s", w.stderr.String())
		}
	})
	return w
}

// Confirmed waits until the worker printed that the broker confirmed a
// message, and returns its id.
func (w *Worker) Confirmed(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-w.lines:
		require.True(t, ok, "worker exited; stderr:\n%s", w.stderr.String())
		id, found := strings.CutPrefix(line, "confirmed ")
		require.True(t, found, "worker said %q", line)
		return id
	case <-time.After(within):
		t.Fatalf("worker confirmed nothing within %v", within)
		return ""
	}
}

// Kill sends SIGKILL and reaps the worker.
func (w *Worker) Kill(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	_ = w.cmd.Wait()
}
