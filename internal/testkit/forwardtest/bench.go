package forwardtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Bench topics: a broker that needs its destinations made beforehand (a
// Kafka topic, a JetStream stream) makes them for these names.
const (
	BenchBacklogTopic = "bench-backlog"
	BenchTimedTopic   = "bench-timed"
)

// BenchConfig sizes Bench.
type BenchConfig struct {
	Backlog     int           // messages already due when forwarding starts
	Timed       int           // messages coming due while forwarding runs...
	Over        time.Duration // ...evenly over this long
	Concurrency int           // RMQ handlers (consumer.WithConcurrency)
	BrokerPID   int           // the broker's process, for its CPU; 0: none
}

// Bench forwards a backlog with fw and reports messages per second, then
// forwards messages coming due and reports the lateness from due time to
// the broker's confirm (when fw returned nil): p50, p99 and max. CPU per
// message, from /proc, for this process (RMQ client, broker client, and a
// kfake broker), Redis and the broker process. It ignores b.N: run it with
// -benchtime 1x.
func Bench(b *testing.B, fw consumer.MessageListener, cfg BenchConfig) {
	// The library's log (INFO by default) is not part of what is measured.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := redistest.Shared(b)
	rdb := redistest.Client(b, srv)
	prefix := redistest.Prefix(b)
	ctx := context.Background()
	p := rmqtest.Producer(b, rdb, prefix)

	// Backlog: all due before the consumer starts.
	backlog := topic.MustNew(BenchBacklogTopic, topic.FixedTime, 16)
	sendBench(b, p, backlog, cfg.Backlog, time.Now().Add(-time.Second), 0)
	rec := newTiming(fw, cfg.Backlog)
	c := startBench(b, rdb, prefix, backlog, rec, cfg.Concurrency)
	cpu0 := readCPU(b, rdb, cfg.BrokerPID)
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	rec.wait(b, 5*time.Minute)
	elapsed := time.Since(start)
	cpu1 := readCPU(b, rdb, cfg.BrokerPID)
	closeBench(b, c)
	rate := float64(cfg.Backlog) / elapsed.Seconds()
	b.ReportMetric(rate, "msgs/s")
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(cfg.Backlog) }
	b.ReportMetric(per(cpu1.self-cpu0.self), "µs-cpu-client/msg")
	b.ReportMetric(per(cpu1.redis-cpu0.redis), "µs-cpu-redis/msg")
	if cfg.BrokerPID != 0 {
		b.ReportMetric(per(cpu1.broker-cpu0.broker), "µs-cpu-broker/msg")
	}

	// Timed: lateness of messages coming due one by one, first with a
	// listener that does nothing (RMQ's own lateness, the anchor), then
	// with the forwarder.
	nop := consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })
	for _, run := range []struct {
		name string
		l    consumer.MessageListener
	}{{"anchor-", nop}, {"", fw}} {
		timed := topic.MustNew(BenchTimedTopic, topic.FixedTime, 16)
		rec = newTiming(run.l, cfg.Timed)
		c = startBench(b, rdb, prefix+run.name, timed, rec, cfg.Concurrency)
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		sendBench(b, rmqtest.Producer(b, rdb, prefix+run.name), timed, cfg.Timed, time.Now().Add(2*time.Second), cfg.Over)
		rec.wait(b, cfg.Over+time.Minute)
		closeBench(b, c)
		late := rec.lateness()
		q := func(f float64) float64 { return float64(late[int(f*float64(len(late)-1))].Microseconds()) / 1000 }
		b.ReportMetric(q(0.5), run.name+"p50-late-ms")
		b.ReportMetric(q(0.99), run.name+"p99-late-ms")
		b.ReportMetric(q(1), run.name+"max-late-ms")
	}
}

func sendBench(b *testing.B, p *producer.Producer, tp topic.Topic, n int, from time.Time, over time.Duration) {
	const chunk = 1000
	for lo := 0; lo < n; lo += chunk {
		var batch []producer.BatchMessage
		for i := lo; i < min(lo+chunk, n); i++ {
			at := from.Add(over * time.Duration(i) / time.Duration(n))
			batch = append(batch, producer.BatchMessage{Key: ID(i), Body: Body(i), At: at,
				Options: []producer.SendOption{producer.WithHeaders(Headers(i))}})
		}
		if _, err := p.SendBatch(context.Background(), tp, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func startBench(b *testing.B, rdb *redis.Client, prefix string, tp topic.Topic, l consumer.MessageListener, conc int) *rmq.Client {
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(tp, l, consumer.WithConcurrency(conc)); err != nil {
		b.Fatal(err)
	}
	return c
}

func closeBench(b *testing.B, c *rmq.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		b.Error(err)
	}
}

// timing wraps a forwarder and records, per forwarded message, how late
// its confirm came after its due time.
type timing struct {
	l    consumer.MessageListener
	want int
	mu   sync.Mutex
	late []time.Duration
	done chan struct{}
}

func newTiming(l consumer.MessageListener, want int) *timing {
	return &timing{l: l, want: want, done: make(chan struct{})}
}

func (t *timing) OnMessage(ctx context.Context, m *consumer.Message) error {
	if err := t.l.OnMessage(ctx, m); err != nil {
		return err
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.late = append(t.late, now.Sub(m.DueAt))
	if len(t.late) == t.want {
		close(t.done)
	}
	return nil
}

func (t *timing) wait(b *testing.B, within time.Duration) {
	select {
	case <-t.done:
	case <-time.After(within):
		t.mu.Lock()
		defer t.mu.Unlock()
		b.Fatalf("forwarded %d of %d within %v", len(t.late), t.want, within)
	}
}

func (t *timing) lateness() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := slices.Clone(t.late)
	slices.Sort(l)
	return l
}

type cpuTimes struct{ self, redis, broker time.Duration }

func readCPU(b *testing.B, rdb *redis.Client, brokerPID int) cpuTimes {
	var c cpuTimes
	c.self = ProcCPU(os.Getpid())
	if brokerPID != 0 {
		c.broker = ProcCPU(brokerPID)
	}
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			c.redis += time.Duration(f * float64(time.Second))
		}
	}
	return c
}

// ProcCPU is a process's user+system CPU time from /proc/<pid>/stat.
func ProcCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}
