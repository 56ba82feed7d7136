package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// BenchmarkBinaryForwardNATS measures the rmqd binary forwarding into
// JetStream (a file stream on a nats-server on this machine): a backlog of
// jobs published over HTTP while the queue was paused, forwarded once it
// is resumed (jobs/s from the resume to the last arrival at a subscriber),
// then jobs coming due over 5 s (lateness from each job's due time to its
// arrival at the subscriber: p50, p99, max). CPU per job of rmqd, Redis
// and nats-server during the backlog, from /proc and INFO cpu. It ignores
// b.N: run it with -benchtime 1x.
//
//	go test -run '^$' -bench BinaryForwardNATS -benchtime 1x ./cmd/rmqd
func BenchmarkBinaryForwardNATS(b *testing.B) {
	const (
		backlog = 20_000
		timed   = 5_000
		over    = 5 * time.Second
	)
	srv := brokertest.NATS(b)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.fw"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	rec := &benchArrivals{}
	sub, err := nc.Subscribe("bench.fw", rec.add)
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}

	rsrv := redistest.Shared(b)
	rdb := redistest.Client(b, rsrv)
	p := startRmqd(b, "redis://"+rsrv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(b), "RMQD_ACCESS_LOG=false", "RMQD_LOG_LEVEL=warn"},
		"--forward", "shop/bench=nats://"+srv.Addr()+"/bench.fw")
	a := do(b, "POST", p.admin+"/token/shop?description=bench", "")
	var tok map[string]string
	a.json(b, &tok)
	hdr := "X-Token: " + tok["token"]

	// Backlog: published while paused, forwarded from the resume on.
	if a := do(b, "POST", p.admin+"/queue/shop/bench/pause", ""); a.status != http.StatusNoContent {
		b.Fatalf("pause: %s", a)
	}
	benchPublish(b, p.api, hdr, backlog, func(int) string { return "delay=0" })
	rec.reset()
	cpu0 := benchCPU(b, rdb, p.cmd.Process.Pid, srv.Pid())
	start := time.Now()
	if a := do(b, "POST", p.admin+"/queue/shop/bench/resume", ""); a.status != http.StatusNoContent {
		b.Fatalf("resume: %s", a)
	}
	rec.wait(b, backlog)
	elapsed := rec.last().Sub(start)
	cpu1 := benchCPU(b, rdb, p.cmd.Process.Pid, srv.Pid())
	b.ReportMetric(backlog/elapsed.Seconds(), "jobs/s")
	per := func(i int) float64 { return float64((cpu1[i] - cpu0[i]).Microseconds()) / backlog }
	b.ReportMetric(per(0), "µs-cpu-rmqd/job")
	b.ReportMetric(per(1), "µs-cpu-redis/job")
	b.ReportMetric(per(2), "µs-cpu-nats/job")

	// Timed: bulk requests of 64 jobs, each request due at its own instant
	// within `over`, starting 2 s from now (after every request is in).
	rec.reset()
	first := time.Now().Add(2 * time.Second)
	requests := (timed + 63) / 64
	benchPublish(b, p.api, hdr, timed, func(i int) string {
		at := first.Add(time.Duration(i/64) * over / time.Duration(requests))
		return "at=" + at.UTC().Format(time.RFC3339Nano)
	})
	late := rec.wait(b, timed)
	b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "ms-late-p50")
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "ms-late-p99")
	b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "ms-late-max")
	if late[0] < 0 {
		b.Errorf("a job arrived %v before its due time", -late[0])
	}
}

// benchPublish publishes n jobs of 128 bytes to shop/bench in bulk
// requests of 64 from 8 goroutines; query(i) is the query of the request
// that holds job i.
func benchPublish(b *testing.B, api, hdr string, n int, query func(i int) string) {
	body, _ := json.Marshal(strings.Repeat("x", 126)) // a 128-byte JSON string per job
	var wg sync.WaitGroup
	reqs := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reqs {
				k := min(64, n-i)
				jobs := "[" + strings.TrimSuffix(strings.Repeat(string(body)+",", k), ",") + "]"
				req, _ := http.NewRequest("PUT", api+"/api/shop/bench/bulk?"+query(i), strings.NewReader(jobs))
				name, v, _ := strings.Cut(hdr, ": ")
				req.Header.Set(name, v)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("bulk publish: %s", resp.Status)
				}
			}
		}()
	}
	for i := 0; i < n; i += 64 {
		reqs <- i
	}
	close(reqs)
	wg.Wait()
}

// benchCPU reads the CPU time of rmqd, Redis and nats-server.
func benchCPU(b *testing.B, rdb *redis.Client, rmqdPID, natsPID int) [3]time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var redisCPU time.Duration
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			var f float64
			fmt.Sscan(v, &f)
			redisCPU += time.Duration(f * float64(time.Second))
		}
	}
	return [3]time.Duration{forwardtest.ProcCPU(rmqdPID), redisCPU, forwardtest.ProcCPU(natsPID)}
}

// benchArrivals records each arrival's lateness against its rmq-due-at.
type benchArrivals struct {
	mu      sync.Mutex
	late    []time.Duration
	at      time.Time // of the last arrival
	bad     error
	changed chan struct{} // closed and replaced at each arrival; nil until waited on
}

func (r *benchArrivals) add(m *nats.Msg) {
	now := time.Now()
	due, err := time.Parse(time.RFC3339Nano, m.Header.Get("rmq-due-at"))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.bad == nil {
		r.bad = err
	}
	r.late = append(r.late, now.Sub(due))
	r.at = now
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

func (r *benchArrivals) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late, r.bad = nil, nil
}

func (r *benchArrivals) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

// wait returns the sorted lateness of n arrivals once they came, woken by
// each arrival.
func (r *benchArrivals) wait(b *testing.B, n int) []time.Duration {
	deadline := time.After(5 * time.Minute)
	for {
		r.mu.Lock()
		got, bad := len(r.late), r.bad
		late := slices.Clone(r.late)
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if bad != nil {
			b.Fatal(bad)
		}
		if got >= n {
			if got > n {
				b.Errorf("%d arrivals, want %d", got, n)
			}
			slices.Sort(late)
			return late
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("%d of %d jobs arrived", got, n)
		}
	}
}
