//go:build linux

package zkfleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// workerEnv selects the worker role of this test binary; its value is the
// JSON of a workerConfig.
const workerEnv = "RMQ_ZKFLEET_WORKER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(runWorker(cfg))
	}
	redistest.VerifyTestMain(m)
}

type workerConfig struct {
	Name           string
	Redis, ZK      string
	Prefix, Topic  string
	Slots          int
	SessionTimeout time.Duration
	WorkMin        time.Duration // a handler works a random time in [WorkMin, WorkMax]
	WorkMax        time.Duration
	Concurrency    int
	Out            string // record file
	// Deferred workers get everything ready, print "loaded" and join the
	// fleet only when "join" arrives on stdin, so the test picks the moment
	// independently of how long a process takes to start.
	Deferred bool
}

// record writes the worker's records, one line per write(2), so a SIGKILL
// loses none that were written.
//
//	S worker slot id epoch attempt unixNano        handler started
//	E worker slot id epoch unixNano cause          handler ended (cause of a cancelled context, or -)
//	X worker slot op unixNano                      Redis refused a call (stale owner epoch)
//	R worker slot id outcome unixNano              a delivery that did not end with an ack
//	O worker unixNano n slot,slot,...              owned slots, every 100 ms
type record struct {
	rmq.BaseObserver
	mu   sync.Mutex
	f    *os.File
	name string
}

func (r *record) line(format string, args ...any) {
	b := fmt.Appendf(nil, format+"\n", args...)
	r.mu.Lock()
	_, _ = r.f.Write(b)
	r.mu.Unlock()
}

// The observer half of the recorder (an rmq.Observer with FenceObserver).
func (r *record) Finished(m *consumer.Message, _ time.Duration, o consumer.Outcome, _ error) {
	if o != consumer.Acked {
		r.line("R %s %d %s %s %d", r.name, m.Slot, m.ID, o, time.Now().UnixNano())
	}
}
func (r *record) Fenced(_ string, slot int, op string) {
	r.line("X %s %d %s %d", r.name, slot, op, time.Now().UnixNano())
}

func causeName(err error) string {
	switch {
	case err == nil:
		return "-"
	case errors.Is(err, consumer.ErrOwnershipLost):
		return "ownership_lost"
	case errors.Is(err, consumer.ErrFenced):
		return "fenced"
	case errors.Is(err, consumer.ErrShutdown):
		return "shutdown"
	case errors.Is(err, consumer.ErrLeaseLost):
		return "lease_lost"
	}
	return "other"
}

func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	f, err := os.OpenFile(cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	rec := &record{f: f, name: cfg.Name}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", cfg.Name)
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, DisableIdentity: true})
	c, err := rmq.New(rdb, rmq.WithPrefix(cfg.Prefix), rmq.WithLogger(log), rmq.WithObserver(rec),
		rmq.WithZooKeeper([]string{cfg.ZK}, rmq.ZKSessionTimeout(cfg.SessionTimeout)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	tp, err := topic.New(cfg.Topic, topic.FixedTime, cfg.Slots)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	handler := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		rec.line("S %s %d %s %d %d %d", cfg.Name, m.Slot, m.ID, m.Epoch, m.Attempt, time.Now().UnixNano())
		work := cfg.WorkMin
		if cfg.WorkMax > cfg.WorkMin {
			work += rand.N(cfg.WorkMax - cfg.WorkMin)
		}
		// The work goes in steps of at most 1 ms, checking the context in
		// between, like real work does: a handler frozen mid-way still has
		// steps left when the process wakes up.
		var cause error
		for left := work; left > 0 && cause == nil; left -= time.Millisecond {
			t := time.NewTimer(min(left, time.Millisecond))
			select {
			case <-t.C:
			case <-ctx.Done():
				cause = context.Cause(ctx)
			}
			t.Stop()
		}
		rec.line("E %s %d %s %d %d %s", cfg.Name, m.Slot, m.ID, m.Epoch, time.Now().UnixNano(), causeName(cause))
		// Like a handler whose work cannot be undone, it reports success even
		// when its context was cancelled: the ack is what fencing must refuse.
		return nil
	})
	if err := c.Register(tp, handler, consumer.WithConcurrency(cfg.Concurrency)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	if cfg.Deferred {
		fmt.Println("loaded")
		if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "join\n" {
			fmt.Fprintln(os.Stderr, "worker: no join order:", err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err = c.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker start:", err)
		return 2
	}
	fmt.Println("ready", c.FleetMember())

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-term:
			running = false
		case <-tick.C:
			owned := c.OwnedSlots(cfg.Topic)
			list := make([]int, 0, len(owned))
			for s := range owned {
				list = append(list, s)
			}
			sort.Ints(list)
			parts := make([]string, len(list))
			for i, s := range list {
				parts[i] = strconv.Itoa(s)
			}
			rec.line("O %s %d %d %s", cfg.Name, time.Now().UnixNano(), len(list), strings.Join(parts, ","))
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker close:", err)
		return 1
	}
	_ = rdb.Close()
	fmt.Println("closed")
	return 0
}
