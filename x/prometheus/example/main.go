// Command example shows RMQ's Prometheus metrics (module
// github.com/rmq-go/rmq/x/prometheus). It attaches the metrics to an
// rmq.Client (rmq.WithObserver), serves the registry on /metrics on a
// loopback port, runs a little traffic, scrapes itself once and prints the
// scrape:
//
//   - prices (RangeMerge): four price changes of which two merge into a
//     waiting message, two deliveries, both acked;
//   - orders (FixedTime): five orders due at once, one of which always
//     fails: retried once, then dead (WithMaxRetries(1));
//   - jobs (Priority): three jobs nobody consumes, so they show in the
//     store depth gauge.
//
// It needs a Redis; run it from x/prometheus with
//
//	go run ./example                                  # Redis at 127.0.0.1:6379
//	REDIS_URL=redis://127.0.0.1:6380/0 go run ./example  # or REDIS_ADDR=127.0.0.1:6380
//	go run ./example -buckets                         # histogram buckets too
//	go run ./example -serve                           # keep serving /metrics
//
// Its keys live under a prefix of their own, deleted at the end.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
	rmqprom "github.com/rmq-go/rmq/x/prometheus"
)

func main() {
	buckets := flag.Bool("buckets", false, "print histogram bucket lines too")
	serve := flag.Bool("serve", false, "keep serving /metrics after the scrape, until interrupted")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts, err := redisOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "example: REDIS_URL:", err)
		os.Exit(2)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	// A prefix no earlier run used, so a shared Redis starts from empty
	// queues.
	prefix := "rmq-example-observability-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	err = run(ctx, rdb, prefix, os.Stdout, options{buckets: *buckets, serve: *serve})
	if derr := deleteKeys(context.Background(), rdb, prefix); derr != nil {
		fmt.Fprintln(os.Stderr, "deleting the example's keys:", derr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// redisOptions names the Redis: REDIS_URL, the project's one variable for
// it (redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss:// for TLS, or a bare
// HOST:PORT), else REDIS_ADDR (its older name), else 127.0.0.1:6379.
func redisOptions() (*redis.Options, error) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = os.Getenv("REDIS_ADDR")
	}
	if url == "" {
		url = "127.0.0.1:6379"
	}
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	return redis.ParseURL(url)
}

// deleteKeys removes every key under prefix.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Unlink(ctx, keys...).Err()
}

type options struct {
	buckets bool // print histogram bucket lines
	serve   bool // keep serving until ctx is done
}

var (
	prices = topic.MustNew("prices", topic.RangeMerge, 4)
	orders = topic.MustNew("orders", topic.FixedTime, 4)
	jobs   = topic.MustNew("jobs", topic.Priority, 2)
)

// run does the whole example against rdb, under prefix, writing to out.
func run(ctx context.Context, rdb *redis.Client, prefix string, out io.Writer, opt options) (err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	metrics, err := rmqprom.New(reg, rmqprom.WithLogger(log))
	if err != nil {
		return err
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithObserver(metrics), rmq.WithLogger(log))
	if err != nil {
		return err
	}
	metrics.WatchQueues(c.Inspector())
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if cerr := c.Close(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := c.Register(prices, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		time.Sleep(3 * time.Millisecond) // some work
		return nil
	})); err != nil {
		return err
	}
	if err := c.Register(orders, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.ID == "order-13" {
			return errors.New("payment service refused order-13")
		}
		return nil
	}), consumer.WithMaxRetries(1), consumer.WithRetryBackoff(func(int) time.Duration { return 50 * time.Millisecond })); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}

	// The metrics endpoint, on a free loopback port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/metrics"
	fmt.Fprintf(out, "# serving %s\n", url)

	if err := traffic(ctx, c.Producer()); err != nil {
		return err
	}
	if err := settle(ctx, c.Inspector()); err != nil {
		return err
	}
	body, err := scrape(ctx, url)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# GET %s\n", url)
	printScrape(out, body, opt.buckets)
	if opt.serve {
		fmt.Fprintf(out, "# still serving %s; interrupt to stop\n", url)
		<-ctx.Done()
	}
	return nil
}

// traffic sends the example's messages.
func traffic(ctx context.Context, p *producer.Producer) error {
	for _, s := range []struct {
		sku   string
		price string
	}{{"sku-1", "10.00"}, {"sku-1", "10.50"}, {"sku-2", "7.25"}, {"sku-1", "9.99"}} {
		body := fmt.Sprintf(`{"sku":%q,"price":%s}`, s.sku, s.price)
		if _, err := p.SendRangeMerge(ctx, prices, []byte(body), 200*time.Millisecond, producer.WithKey(s.sku)); err != nil {
			return err
		}
	}
	due := time.Now().Add(100 * time.Millisecond)
	for i := 10; i < 15; i++ {
		id := fmt.Sprintf("order-%d", i)
		if _, err := p.SendFixedTime(ctx, orders, []byte(`{"order":"`+id+`"}`), due, producer.WithKey(id)); err != nil {
			return err
		}
	}
	for i, prio := range []int64{100, 500, 300} {
		if _, err := p.SendPriority(ctx, jobs, []byte(fmt.Sprintf("job %d", i)), prio); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until prices and orders are fully handled: nothing waiting
// or in flight, order-13 dead.
func settle(ctx context.Context, insp *rmq.Inspector) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		p, err := insp.Stats(ctx, prices)
		if err != nil {
			return err
		}
		o, err := insp.Stats(ctx, orders)
		if err != nil {
			return err
		}
		if p.Store+p.Prepare == 0 && o.Store+o.Prepare == 0 && o.Dead == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("traffic did not settle: prices %d/%d, orders %d/%d/%d", p.Store, p.Prepare, o.Store, o.Prepare, o.Dead)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func scrape(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// printScrape prints a scrape; histogram bucket lines only if asked.
func printScrape(out io.Writer, body string, buckets bool) {
	left := 0
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !buckets && strings.Contains(line, "_bucket{") {
			left++
			continue
		}
		fmt.Fprintln(out, line)
	}
	if left > 0 {
		fmt.Fprintf(out, "# (%d histogram bucket lines left out; -buckets shows them)\n", left)
	}
}
