package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/admin"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// The helper roles of this test binary (see TestMain): a client process
// that sends and consumes a queue's topic, and a reader that prints the
// topic's history as a new Inspector reads it.
const (
	histRoleEnv   = "RMQD_TEST_HIST_ROLE"
	histAddrEnv   = "RMQD_TEST_HIST_ADDR"
	histPrefixEnv = "RMQD_TEST_HIST_PREFIX"
	histTopicEnv  = "RMQD_TEST_HIST_TOPIC"
	histSendEnv   = "RMQD_TEST_HIST_SEND"
	histSinceEnv  = "RMQD_TEST_HIST_SINCE"
)

// histRole runs the role the environment names; ok is false when it names
// none.
func histRole() (code int, ok bool) {
	switch os.Getenv(histRoleEnv) {
	case "client":
		return runHistClient(), true
	case "reader":
		return runHistReader(), true
	}
	return 0, false
}

// runHistClient sends RMQD_TEST_HIST_SEND messages to the topic and acks
// every delivery of it; it prints "sent" once its sends are done, and at
// the end of its input closes the client and prints "acked N".
func runHistClient() int {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(histAddrEnv), DisableIdentity: true})
	prefix := os.Getenv(histPrefixEnv)
	t, err := rmq.NewInspector(rdb, rmq.WithPrefix(prefix)).Topic(ctx, os.Getenv(histTopicEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	var acked atomic.Int64
	if err := c.Register(t, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		acked.Add(1)
		return nil
	}), consumer.WithConcurrency(4)); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv(histSendEnv))
	for i := range n {
		if _, err := c.Producer().SendFixedTime(ctx, t, []byte("x"), time.Now(),
			producer.WithKey(fmt.Sprintf("%d-%d", os.Getpid(), i))); err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			return 2
		}
	}
	fmt.Println("sent")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	fmt.Println("acked", acked.Load())
	return 0
}

// runHistReader prints the topic's history since RMQD_TEST_HIST_SINCE
// (Unix ms) as JSON.
func runHistReader() int {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(histAddrEnv), DisableIdentity: true})
	in := rmq.NewInspector(rdb, rmq.WithPrefix(os.Getenv(histPrefixEnv)))
	t, err := in.Topic(ctx, os.Getenv(histTopicEnv))
	if err == nil {
		ms, _ := strconv.ParseInt(os.Getenv(histSinceEnv), 10, 64)
		var ps []rmq.MetricPoint
		if ps, err = in.History(ctx, t, time.UnixMilli(ms)); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(ps)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		return 2
	}
	return 0
}

// 1,000 messages go through two client processes and rmqd: rmqd publishes
// 400 over HTTP, each process sends 300; the processes consume with
// handlers and this test consumes over rmqd's API, all at once. A new
// Inspector in a third process then reads the queue's history: every
// message sent and completed once, in the minutes of the run; rmqd's
// history route answers the same. The two processes are listed as
// workers while they run, and not once they closed.
func TestHistoryThroughProcessesAndRmqd(t *testing.T) {
	e := newEnv(t)
	const ns, q, viaHTTP, perProcess = "hist", "jobs", 400, 300
	const total = viaHTTP + 2*perProcess
	tok := e.token(ns)
	start := time.Now()
	for i := range viaHTTP {
		e.publish(tok, ns, q, "", fmt.Sprint("job-", i))
	}
	// rmqd's consumers take the first 100 (the processes would take them
	// all otherwise), then share the rest with the processes.
	viaRmqd := 0
	consume := func(most int) {
		for viaRmqd < most {
			a := do(t, "GET", e.url("/api/"+ns+"/"+q+"?timeout=0"), "", "X-Token: "+tok)
			if a.status == http.StatusNotFound {
				return
			}
			require.Equal(t, http.StatusOK, a.status, "%s", a)
			var j struct {
				JobID string `json:"job_id"`
			}
			a.json(t, &j)
			d := do(t, "DELETE", e.url("/api/"+ns+"/"+q+"/job/"+j.JobID), "", "X-Token: "+tok)
			require.Equal(t, http.StatusNoContent, d.status, "%s", d)
			viaRmqd++
		}
	}
	consume(100)
	name := names.TopicName(ns, q)
	env := []string{histAddrEnv + "=" + e.srv.Addr(), histPrefixEnv + "=" + e.prefix, histTopicEnv + "=" + name}

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var procs []proc
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), append(env, histRoleEnv+"=client", histSendEnv+"="+strconv.Itoa(perProcess))...)
		cmd.Stderr = e.log
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs = append(procs, proc{cmd, stdin, bufio.NewReader(stdout)})
	}
	for _, p := range procs {
		line, err := p.out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "sent\n", line)
	}

	// Consume over HTTP alongside the processes until nothing waits or
	// runs.
	in := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	ctx := context.Background()
	tp, err := in.Topic(ctx, name)
	require.NoError(t, err)
	redistest.PollWithin(t, time.Minute, func() error {
		consume(total)
		st, err := in.Stats(ctx, tp)
		require.NoError(t, err)
		if st.Store+st.Prepare > 0 {
			return fmt.Errorf("%d waiting, %d in flight", st.Store, st.Prepare)
		}
		return nil
	})

	// The processes are workers while they run; they leave at Close.
	pids := func() map[int][]string {
		ws, err := in.Workers(ctx)
		require.NoError(t, err)
		out := map[int][]string{}
		for _, w := range ws {
			out[w.PID] = w.Topics
		}
		return out
	}
	listed := pids()
	for _, p := range procs {
		require.Equal(t, []string{name}, listed[p.cmd.Process.Pid], "workers: %v", listed)
	}
	require.Contains(t, listed, os.Getpid(), "rmqd's client is a worker too")
	a := do(t, "GET", e.admin.URL+"/workers", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var ws []admin.Worker
	a.json(t, &ws)
	require.GreaterOrEqual(t, len(ws), 3)

	viaProcs := 0
	for _, p := range procs {
		require.NoError(t, p.stdin.Close())
		line, err := p.out.ReadString('\n')
		require.NoError(t, err)
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "acked ")))
		require.NoError(t, err, "%q", line)
		viaProcs += n
		require.NoError(t, p.cmd.Wait())
	}
	require.Equal(t, total, viaRmqd+viaProcs, "every message completed once")
	require.GreaterOrEqual(t, viaRmqd, 100)
	listed = pids()
	for _, p := range procs {
		require.NotContains(t, listed, p.cmd.Process.Pid, "a closed process leaves at once")
	}

	// rmqd's counts are written within its flush interval (10 s): wait for
	// them through this process's inspector, then read in a third process.
	sum := func(ps []rmq.MetricPoint) (s rmq.MetricPoint) {
		for _, p := range ps {
			s.Sent += p.Sent
			s.Completed += p.Completed
			s.Retried += p.Retried
			s.Dead += p.Dead
		}
		return s
	}
	redistest.PollWithin(t, 30*time.Second, func() error {
		ps, err := in.History(ctx, tp, start)
		require.NoError(t, err)
		if s := sum(ps); s.Sent != total || s.Completed != total {
			return fmt.Errorf("history so far: %+v", s)
		}
		return nil
	})
	reader := exec.Command(os.Args[0], "-test.run=^$")
	reader.Env = append(os.Environ(), append(env, histRoleEnv+"=reader", histSinceEnv+"="+strconv.FormatInt(start.UnixMilli(), 10))...)
	reader.Stderr = e.log
	out, err := reader.Output()
	require.NoError(t, err)
	var ps []rmq.MetricPoint
	require.NoError(t, json.Unmarshal(out, &ps))
	require.Equal(t, rmq.MetricPoint{Sent: total, Completed: total}, sum(ps))
	end := time.Now()
	require.Equal(t, start.Truncate(time.Minute), ps[0].Minute.Local().Truncate(time.Minute).In(start.Location()))
	for _, p := range ps {
		require.False(t, p.Minute.After(end), "a point after the run: %+v", p)
		if p.Completed > 0 {
			require.Positive(t, p.HandlerP99, "%+v", p)
		}
	}

	// rmqd's route answers the same points.
	h := do(t, "GET", e.url("/api/"+ns+"/"+q+"/history?since="+time.Since(start).Round(time.Second).String()), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, h.status, "%s", h)
	var body api.HistoryBody
	h.json(t, &body)
	var sent, completed int64
	for _, p := range body.Points {
		sent += p.Sent
		completed += p.Completed
	}
	require.EqualValues(t, total, sent)
	require.EqualValues(t, total, completed)
	requireError(t, do(t, "GET", e.url("/api/"+ns+"/"+q+"/history?since=x"), "", "X-Token: "+tok), http.StatusBadRequest, "invalid since")
}
