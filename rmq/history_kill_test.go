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
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The history worker role of this test binary (see TestMain): a started
// client whose worker record expires 1 s after its last refresh; it prints
// "started" and waits to be killed.
const histWorkerRole = "history-worker"

// histWorkerTTL is the worker record TTL of the role: shorter than the
// default so that the test need not wait 30 s.
const histWorkerTTL = time.Second

func runHistWorker() int {
	var rdb redis.UniversalClient
	if os.Getenv(workerClusterEnv) == "1" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(workerAddrEnv), ","), DisableIdentity: true})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: os.Getenv(workerAddrEnv), DisableIdentity: true})
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(os.Getenv(workerPrefixEnv)), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		rmq.HistoryTimings(200*time.Millisecond, histWorkerTTL))
	if err == nil {
		err = c.Register(topic.MustNew(os.Getenv(workerTopicEnv), topic.FixedTime, 1),
			consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }))
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.Start(ctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	fmt.Println("started")
	select {} // until killed
}

// A process killed with SIGKILL leaves Workers once its record's TTL
// passed (the inspector prunes it from the index); one that stays alive
// stays listed, refreshed by its heartbeat.
func TestHistoryKilledWorkerLeaves(t *testing.T) {
	require.LessOrEqual(t, history.DefaultWorkerTTL, 60*time.Second, "a killed process leaves within a minute")
	for _, b := range rmqtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := rmqtest.NewFor(t, b)
			ctx := rmqtest.Ctx(t)
			addr := ""
			cluster := "0"
			if e.Cl != nil {
				addr, cluster = strings.Join(e.Cl.Addrs(), ","), "1"
			} else {
				addr = e.Srv.Addr()
			}
			start := func() *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), workerEnv+"="+histWorkerRole, workerAddrEnv+"="+addr, workerClusterEnv+"="+cluster,
					workerPrefixEnv+"="+e.Prefix, workerTopicEnv+"=killed")
				out, err := cmd.StdoutPipe()
				require.NoError(t, err)
				cmd.Stderr = e.Log
				require.NoError(t, cmd.Start())
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				line, err := bufio.NewReader(out).ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "started\n", line)
				return cmd
			}
			victim, survivor := start(), start()
			in := rmq.NewInspector(e.RDB, rmq.WithPrefix(e.Prefix))
			pids := func() map[int]bool {
				ws, err := in.Workers(ctx)
				require.NoError(t, err)
				out := map[int]bool{}
				for _, w := range ws {
					require.Equal(t, []string{"killed"}, w.Topics)
					out[w.PID] = true
				}
				return out
			}
			redistest.Poll(t, func() error {
				if got := pids(); !got[victim.Process.Pid] || !got[survivor.Process.Pid] {
					return fmt.Errorf("workers %v", got)
				}
				return nil
			})
			require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
			killed := time.Now()
			redistest.Poll(t, func() error {
				if got := pids(); got[victim.Process.Pid] {
					return fmt.Errorf("the killed worker is still listed: %v", got)
				}
				return nil
			})
			gone := time.Since(killed)
			require.Less(t, gone, histWorkerTTL+2*time.Second, "gone within its TTL")
			require.True(t, pids()[survivor.Process.Pid], "the live worker stays")
			// The index holds no entry of the killed one either (pruned).
			n, err := e.RDB.ZCard(ctx, history.WorkersKey(e.Prefix)).Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
		})
	}
}
