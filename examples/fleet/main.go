// Command fleet shows serial per-key consumption across a fleet coordinated
// by ZooKeeper: three workers share the 16 slots of an "order-events" topic
// (each slot has exactly one owner at a time) and a producer sends every
// order's events (created, paid, packed, shipped, ...) in sequence. Every
// order's events are handled one after another, in order, even when a
// worker leaves half-way and its slots move to the others.
//
// Each handler writes to a toy downstream store that uses Message.Epoch as
// a fencing token: it refuses a write carrying an older epoch than one it
// already accepted for that order, which is how a real store keeps out a
// worker that was frozen past its ZooKeeper session.
//
// It talks to the Redis that REDIS_URL names (default 127.0.0.1:6379) and
// the ZooKeeper at ZK_ADDR (default 127.0.0.1:2181), under a key prefix of
// its own that it deletes at the end:
//
//	REDIS_URL=redis://127.0.0.1:6379 ZK_ADDR=127.0.0.1:2181 go run ./examples/fleet
//
// `go run ./examples/demo fleet` runs it against a throwaway redis-server and
// ZooKeeper instead.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

const (
	orders = 12
	events = 6
	work   = 15 * time.Millisecond // each handler's "work"
)

var steps = []string{"created", "paid", "picked", "packed", "shipped", "delivered"}

var orderEvents = topic.MustNew("order-events", topic.FixedTime, 16)

func main() {
	opts, err := redisOptions(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	zkAddr := os.Getenv("ZK_ADDR")
	if zkAddr == "" {
		zkAddr = "127.0.0.1:2181"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	rdb := redis.NewClient(opts)
	// A prefix no earlier run used, so the run starts from empty queues
	// (and a fresh ZooKeeper root, "/rmq/<prefix>").
	prefix := "rmq-example-fleet-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err = run(ctx, rdb, zkAddr, prefix, os.Stdout)
	err = errors.Join(err, deleteKeys(context.Background(), rdb, prefix))
	cancel()
	stop()
	rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// run is the example: three workers and a producer on rdb and ZooKeeper at
// zkAddr, under prefix, telling the story on out.
func run(ctx context.Context, rdb *redis.Client, zkAddr, prefix string, out io.Writer) error {
	store := newStore()
	check := newOrderCheck()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// Three workers, as three processes would be: each client has its own
	// ZooKeeper session and takes part in the slot assignment.
	names := []string{"worker-1", "worker-2", "worker-3"}
	workers := map[string]*rmq.Client{}
	for _, name := range names {
		c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(log),
			rmq.WithZooKeeper([]string{zkAddr}, rmq.ZKSessionTimeout(2*time.Second)))
		if err != nil {
			return err
		}
		handler := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			order, seq := parseEvent(string(m.Body))
			check.start(name, order, seq)
			defer check.end(order)
			time.Sleep(work)
			// The downstream write carries the slot's owner epoch.
			return store.apply(order, seq, m.Epoch)
		})
		if err := c.Register(orderEvents, handler); err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		defer closeWorker(c)
		workers[name] = c
	}
	waitBalanced(workers, 3*time.Second)
	fmt.Fprintf(out, "slots per worker: %s\n", shares(workers, names))

	// The producer: every order's events in sequence, orders interleaved.
	pc, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	if err != nil {
		return err
	}
	p := pc.Producer()
	for seq := 1; seq <= events; seq++ {
		for o := 1; o <= orders; o++ {
			order := fmt.Sprintf("order-%02d", o)
			body := fmt.Sprintf("%s %d", order, seq)
			// The order id is the slot basis: all its events share a slot,
			// hence an owner, hence a serial, ordered consumption.
			_, err := p.SendFixedTime(ctx, orderEvents, []byte(body), time.Now(),
				producer.WithKey(fmt.Sprintf("%s/%d", order, seq)), producer.WithSlotBasis([]byte(order)))
			if err != nil {
				return err
			}
		}
		if seq == events/2 {
			time.Sleep(200 * time.Millisecond)
			fmt.Fprintln(out, "worker-2 leaves: its slots move to the others once its in-flight events are done")
			closeWorker(workers["worker-2"])
			delete(workers, "worker-2")
			waitBalanced(workers, 10*time.Second)
			fmt.Fprintf(out, "slots per worker: %s\n", shares(workers, []string{"worker-1", "worker-3"}))
		}
	}

	deadline := time.Now().Add(time.Minute)
	for store.count() < orders*events {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d events handled", store.count(), orders*events)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintln(out)
	for o := 1; o <= orders; o++ {
		order := fmt.Sprintf("order-%02d", o)
		fmt.Fprintf(out, "%s: %s\n", order, check.history(order))
	}
	if errs := check.errors(); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	fmt.Fprintf(out, "\nall %d events of %d orders handled once each, in order, one at a time per order\n", orders*events, orders)
	return nil
}

func closeWorker(c *rmq.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Close(ctx) // idempotent
}

func parseEvent(body string) (order string, seq int) {
	_, _ = fmt.Sscanf(body, "%s %d", &order, &seq)
	return order, seq
}

// waitBalanced waits until the workers own every slot once, evenly.
func waitBalanced(workers map[string]*rmq.Client, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		total, lo, hi := 0, orderEvents.SlotAmount(), 0
		for _, c := range workers {
			n := len(c.OwnedSlots(orderEvents.Name()))
			total += n
			lo, hi = min(lo, n), max(hi, n)
		}
		if total == orderEvents.SlotAmount() && hi-lo <= 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shares(workers map[string]*rmq.Client, names []string) string {
	var parts []string
	for _, n := range names {
		if c := workers[n]; c != nil {
			parts = append(parts, fmt.Sprintf("%s %d", n, len(c.OwnedSlots(orderEvents.Name()))))
		}
	}
	return strings.Join(parts, ", ")
}

// store is a toy downstream system fenced by the owner epoch: a write for
// an order carrying an older epoch than one already accepted is refused.
type store struct {
	mu     sync.Mutex
	epochs map[string]int64
	n      int
}

var errStaleEpoch = errors.New("downstream: write from a stale owner refused")

func newStore() *store { return &store{epochs: map[string]int64{}} }

func (s *store) apply(order string, seq int, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch < s.epochs[order] {
		return errStaleEpoch
	}
	s.epochs[order] = epoch
	s.n++
	return nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// orderCheck records who handled each order's events, and complains about
// an event handled out of order or while another of its order ran.
type orderCheck struct {
	mu      sync.Mutex
	next    map[string]int
	running map[string]bool
	hist    map[string][]string
	errs    []string
}

func newOrderCheck() *orderCheck {
	return &orderCheck{next: map[string]int{}, running: map[string]bool{}, hist: map[string][]string{}}
}

func (c *orderCheck) start(worker, order string, seq int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running[order] {
		c.errs = append(c.errs, fmt.Sprintf("%s: event %d started while another ran", order, seq))
	}
	c.running[order] = true
	if want := c.next[order] + 1; seq != want {
		c.errs = append(c.errs, fmt.Sprintf("%s: event %d handled when %d was due", order, seq, want))
	}
	c.next[order] = seq
	c.hist[order] = append(c.hist[order], fmt.Sprintf("%s@%s", steps[seq-1], strings.TrimPrefix(worker, "worker-")))
}

func (c *orderCheck) end(order string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[order] = false
}

func (c *orderCheck) history(order string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.hist[order], " → ")
}

func (c *orderCheck) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.errs...)
	sort.Strings(out)
	return out
}

// deleteKeys removes the keys of the run (prefix + ":*").
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var errs []error
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			errs = append(errs, rdb.Unlink(ctx, batch...).Err())
			batch = batch[:0]
		}
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			flush()
		}
	}
	flush()
	errs = append(errs, iter.Err())
	return errors.Join(errs...)
}

// redisOptions reads the Redis to use from REDIS_URL: a URL
// (redis://[[user]:password@]host:port[/db], rediss:// for TLS) or a bare
// host:port. REDIS_ADDR is its older name, still read when REDIS_URL is
// not set. Default: 127.0.0.1:6379.
func redisOptions(getenv func(string) string) (*redis.Options, error) {
	url := getenv("REDIS_URL")
	if url == "" {
		url = getenv("REDIS_ADDR")
	}
	if url == "" {
		url = "127.0.0.1:6379"
	}
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	return opts, nil
}
