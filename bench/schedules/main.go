// Command schedules measures rmq's schedules against one
// throwaway redis-server it starts on a free loopback port and stops:
//
//   - tick lateness (handler call − tick instant) p50/p99/max of N schedules
//     of every second, all ticking at the same instants, consumed by the
//     same clients that schedule them, for -seconds seconds after a warm-up
//     second; each tick must come exactly once and never early;
//
//   - in the same window, the client CPU and Redis commands/s those ticks
//     cost (a roll per slot and second, and the deliveries);
//
//   - idle: the same N schedules set to tick once a year, the clients
//     running; client CPU and Redis commands/s over -idle, against the same
//     clients with no schedule at all in the same run (the anchor).
//
//     cd bench && go run ./schedules                  # N = 1 and 1,000, ≈ 1 minute
//     cd bench && go run ./schedules -n 1,1000,10000 -clients 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

type options struct {
	counts  []int
	clients int
	slots   int
	seconds int
	idle    time.Duration
}

func main() {
	var o options
	var counts string
	flag.StringVar(&counts, "n", "1,1000", "schedule counts")
	flag.IntVar(&o.clients, "clients", 1, "clients that schedule and consume")
	flag.IntVar(&o.slots, "slots", 16, "slots of the ticks' topic")
	flag.IntVar(&o.seconds, "seconds", 10, "seconds of ticks measured")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "the idle window")
	flag.Parse()
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "-n: bad count %q\n", f)
			os.Exit(2)
		}
		o.counts = append(o.counts, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "schedules:", err)
		os.Exit(1)
	}
}

type result struct {
	n                     int
	plain                 waveStats // the anchor: n plain fixed-time messages due at each second
	ticks, extra, early   int
	missing               int
	p50, p99, max         time.Duration
	activeCPU, activeCmds float64 // client CPU ms/s and Redis commands/s while ticking
	activeRedisCPU        float64 // Redis CPU ms/s while ticking
	idleCPU, idleCmds     float64 // with the schedules idle
	idleRedisCPU          float64
	baseCPU, baseCmds     float64 // the same clients without schedules
}

func run(o options) error {
	ctx := context.Background()
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if err := redisserver.EnsureInstalled(ctx, progress); err != nil {
		return err
	}
	srv, err := redisserver.Start(ctx, redisserver.Config{})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, DisableIdentity: true})
	defer rdb.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer admin.Close()
	var results []result
	for _, n := range o.counts {
		r, err := measure(ctx, o, rdb, admin, n)
		if err != nil {
			return fmt.Errorf("n=%d: %w", n, err)
		}
		results = append(results, r)
	}
	failed := false
	version, _ := admin.InfoMap(ctx, "server").Result()
	fmt.Printf("\nschedules: %d client(s) scheduling and consuming, ticks on a FixedTime topic of %d slots; Go %s, %d CPUs, redis %s\n",
		o.clients, o.slots, runtime.Version(), runtime.NumCPU(), version["Server"]["redis_version"])
	fmt.Printf("command: go run ./schedules %s\n\n", strings.Join(os.Args[1:], " "))
	fmt.Println("Anchor, same run and clients: the same number of plain fixed-time messages (SendFixedTime, distinct keys) due at each whole second.")
	fmt.Println()
	fmt.Println("| messages per second | messages | missing | lateness p50 | p99 | max | Redis CPU ms/s | Redis cmds/s |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		p := r.plain
		fmt.Printf("| %d | %d | %d | %s | %s | %s | %.1f | %.0f |\n", r.n, p.msgs, p.missing, ms(p.p50), ms(p.p99), ms(p.max), p.redisCPU, p.cmds)
		failed = failed || p.missing > 0
	}
	fmt.Println()
	fmt.Println("| schedules | ticks | missing/extra/early | lateness p50 | p99 | max | ticking: client CPU ms/s | Redis CPU ms/s | Redis cmds/s | idle: client CPU ms/s | Redis cmds/s | Redis CPU ms/s | no schedules: client CPU ms/s | Redis cmds/s |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %d | %d | %d/%d/%d | %s | %s | %s | %.1f | %.1f | %.0f | %.2f | %.1f | %.2f | %.2f | %.1f |\n",
			r.n, r.ticks, r.missing, r.extra, r.early, ms(r.p50), ms(r.p99), ms(r.max),
			r.activeCPU, r.activeRedisCPU, r.activeCmds, r.idleCPU, r.idleCmds, r.idleRedisCPU, r.baseCPU, r.baseCmds)
		failed = failed || r.missing+r.extra+r.early > 0
	}
	if failed {
		return errors.New("a tick was missed, doubled or early")
	}
	return nil
}

// waveStats is the lateness of plain fixed-time messages due together.
type waveStats struct {
	msgs, missing  int
	p50, p99, max  time.Duration
	cmds, redisCPU float64 // Redis commands/s and CPU ms/s while they fire
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// meter reads the CPU of this process and Redis's commands and CPU.
type meter struct {
	admin *redis.Client
	cpu   time.Duration
	cmds  int64
	rcpu  float64
	at    time.Time
}

func (m *meter) read(ctx context.Context) error {
	info, err := m.admin.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return err
	}
	m.cmds, m.rcpu = 0, 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			m.rcpu += f
		} else if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			m.rcpu += f
		} else if strings.HasPrefix(line, "cmdstat_") && !strings.HasPrefix(line, "cmdstat_info:") {
			_, rest, _ := strings.Cut(line, "calls=")
			v, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			m.cmds += n
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	m.at = time.Now()
	return nil
}

// per returns client CPU ms/s, Redis commands/s and Redis CPU ms/s since
// before.
func (m meter) per(before meter) (cpu, cmds, rcpu float64) {
	s := m.at.Sub(before.at).Seconds()
	return float64(m.cpu-before.cpu) / float64(time.Millisecond) / s, float64(m.cmds-before.cmds) / s, (m.rcpu - before.rcpu) * 1000 / s
}

func window(ctx context.Context, admin *redis.Client, d time.Duration) (cpu, cmds, rcpu float64, err error) {
	var before, after meter
	before.admin, after.admin = admin, admin
	if err := before.read(ctx); err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(d)
	if err := after.read(ctx); err != nil {
		return 0, 0, 0, err
	}
	cpu, cmds, rcpu = after.per(before)
	return cpu, cmds, rcpu, nil
}

func measure(ctx context.Context, o options, rdb *redis.Client, admin *redis.Client, n int) (result, error) {
	r := result{n: n}
	prefix := fmt.Sprintf("bsched%d", n)
	tp, err := topic.New("ticks", topic.FixedTime, o.slots)
	if err != nil {
		return r, err
	}
	var mu sync.Mutex
	late := map[string]time.Duration{}
	count := map[string]int{}
	listener := consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		d := time.Since(m.DueAt)
		mu.Lock()
		late[m.ID] = d
		count[m.ID]++
		mu.Unlock()
		return nil
	})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var clients []*rmq.Client
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, c := range clients {
			_ = c.Close(cctx)
		}
	}()
	for range o.clients {
		c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(log))
		if err != nil {
			return r, err
		}
		if err := c.Register(tp, listener, consumer.WithConcurrency(max(64, n/o.clients))); err != nil {
			return r, err
		}
		if err := c.Start(ctx); err != nil {
			return r, err
		}
		clients = append(clients, c)
	}
	time.Sleep(time.Second)
	if r.baseCPU, r.baseCmds, _, err = window(ctx, admin, o.idle); err != nil {
		return r, err
	}
	if r.plain, err = plainWaves(ctx, o, clients[0], admin, tp, n, late, count, &mu); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "n=%d: anchors done, setting %d schedules\n", n, n)

	s := clients[0].Schedules()
	name := func(i int) string { return fmt.Sprintf("s%05d", i) }
	set := func(spec string) error {
		sem := make(chan struct{}, 32)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				errs <- s.Set(ctx, rmq.Schedule{Name: name(i), Spec: spec, Topic: tp, Body: []byte("tick")})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := set("* * * * * *"); err != nil {
		return r, err
	}
	// Measure the ticks of whole seconds from two seconds on.
	start := time.Now().Truncate(time.Second).Add(2 * time.Second)
	end := start.Add(time.Duration(o.seconds) * time.Second)
	time.Sleep(time.Until(start.Add(-200 * time.Millisecond)))
	var before, after meter
	before.admin, after.admin = admin, admin
	if err := before.read(ctx); err != nil {
		return r, err
	}
	time.Sleep(time.Until(end.Add(-200 * time.Millisecond)))
	if err := after.read(ctx); err != nil {
		return r, err
	}
	r.activeCPU, r.activeCmds, r.activeRedisCPU = after.per(before)
	time.Sleep(time.Until(end.Add(time.Second)))

	mu.Lock()
	var lats []time.Duration
	for i := range n {
		for at := start; at.Before(end); at = at.Add(time.Second) {
			id := fmt.Sprintf("%s@%d", name(i), at.UnixMilli())
			c := count[id]
			switch {
			case c == 0:
				r.missing++
				continue
			case c > 1:
				r.extra += c - 1
			}
			r.ticks++
			if late[id] < 0 {
				r.early++
			}
			lats = append(lats, late[id])
		}
	}
	mu.Unlock()
	slices.Sort(lats)
	if len(lats) > 0 {
		r.p50, r.p99, r.max = lats[len(lats)/2], lats[len(lats)*99/100], lats[len(lats)-1]
	}

	// Idle: the same schedules, ticking once a year.
	if err := set("0 0 1 1 *"); err != nil {
		return r, err
	}
	time.Sleep(2 * time.Second)
	if r.idleCPU, r.idleCmds, r.idleRedisCPU, err = window(ctx, admin, o.idle); err != nil {
		return r, err
	}
	return r, nil
}

// plainWaves sends n fixed-time messages due at each whole second, half a
// second ahead, for -seconds seconds, and takes their lateness.
func plainWaves(ctx context.Context, o options, c *rmq.Client, admin *redis.Client, tp topic.Topic, n int, late map[string]time.Duration, count map[string]int, mu *sync.Mutex) (waveStats, error) {
	var w waveStats
	start := time.Now().Truncate(time.Second).Add(2 * time.Second)
	end := start.Add(time.Duration(o.seconds) * time.Second)
	var before, after meter
	before.admin, after.admin = admin, admin
	p := c.Producer()
	for at := start; at.Before(end); at = at.Add(time.Second) {
		time.Sleep(time.Until(at.Add(-500 * time.Millisecond)))
		if at.Equal(start) {
			if err := before.read(ctx); err != nil {
				return w, err
			}
		}
		items := make([]producer.BatchMessage, n)
		for i := range items {
			items[i] = producer.BatchMessage{Body: []byte("tick"), At: at, Key: fmt.Sprintf("plain%05d@%d", i, at.UnixMilli())}
		}
		if _, err := p.SendBatch(ctx, tp, items); err != nil {
			return w, err
		}
	}
	time.Sleep(time.Until(end.Add(-200 * time.Millisecond)))
	if err := after.read(ctx); err != nil {
		return w, err
	}
	_, w.cmds, w.redisCPU = after.per(before)
	time.Sleep(time.Until(end.Add(time.Second)))
	mu.Lock()
	defer mu.Unlock()
	var lats []time.Duration
	for i := range n {
		for at := start; at.Before(end); at = at.Add(time.Second) {
			id := fmt.Sprintf("plain%05d@%d", i, at.UnixMilli())
			if count[id] == 0 {
				w.missing++
				continue
			}
			w.msgs++
			lats = append(lats, late[id])
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		w.p50, w.p99, w.max = lats[len(lats)/2], lats[len(lats)*99/100], lats[len(lats)-1]
	}
	return w, nil
}
