// Command pricemerge collapses bursts of price changes into one delivery per
// product, with RMQ's RangeMerge messages.
//
// A downstream system (a search index, a cache, a partner feed) needs the
// current price of a product, not every price it had on the way. Each change
// is sent with the product's SKU as key and a MergeWindow range: changes of
// one SKU sent while an earlier one still waits merge into it, and the one
// delivery, due MergeWindow after the first change, carries the latest body.
//
// The story: five changes for each of three SKUs, interleaved, sent within
// a fraction of the window: fifteen sends, three deliveries, each with the
// SKU's last price.
//
// It talks to the Redis that REDIS_URL names (default 127.0.0.1:6379):
//
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/pricemerge
//
// scripts/demo.sh runs it, with the other examples, against a throwaway
// redis-server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// MergeWindow is how long a change waits for later changes of its SKU.
const MergeWindow = time.Second

var changes = topic.MustNew("price-changes", topic.RangeMerge, 8)

// priceChange is the body of a message.
type priceChange struct {
	SKU   string `json:"sku"`
	Price string `json:"price"`
	Seq   int    `json:"seq"` // which change of this SKU, from 1
}

func main() {
	opts, err := redisOptions(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pricemerge:", err)
		os.Exit(2)
	}
	rdb := redis.NewClient(opts)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The prefix keeps the example's keys apart from any other RMQ user of
	// this Redis (the default prefix is "rmq").
	err = run(ctx, rdb, "rmq-example", os.Stdout)
	stop()
	rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pricemerge:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rdb *redis.Client, prefix string, out io.Writer) (err error) {
	start := time.Now()
	lg := log.New(out, "", 0) // safe for the handler goroutines
	say := func(format string, args ...any) {
		lg.Printf("[+%.3fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	c, err := rmq.New(rdb, rmq.WithPrefix(prefix))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, c.Close(cctx))
	}()

	delivered := make(chan priceChange, 16)
	err = c.Register(changes, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		var pc priceChange
		if err := json.Unmarshal(m.Body, &pc); err != nil {
			return err // rolled back and retried; a bad body ends in the dead queue
		}
		// Here a real handler would write pc.Price downstream.
		say("%-12s -> price %s (change #%d; window opened at +%.3fs, fired %v after its due time)",
			pc.SKU, pc.Price, pc.Seq, m.FirstSentAt.Sub(start).Seconds(), time.Since(m.DueAt).Round(time.Millisecond))
		delivered <- pc
		return nil
	}))
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	p := c.Producer()

	skus := []string{"sku-keyboard", "sku-mouse", "sku-monitor"}
	last := map[string]priceChange{}
	for seq := 1; seq <= 5; seq++ {
		for i, sku := range skus {
			pc := priceChange{SKU: sku, Price: fmt.Sprintf("%d.99", 10*(i+1)+seq), Seq: seq}
			body, err := json.Marshal(pc)
			if err != nil {
				return err
			}
			// The SKU is the key: the changes of one SKU merge, those of
			// different SKUs do not.
			if _, err := p.SendRangeMerge(ctx, changes, body, MergeWindow, producer.WithKey(sku)); err != nil {
				return err
			}
			last[sku] = pc
			time.Sleep(10 * time.Millisecond) // changes trickle in
		}
	}
	say("sent 5 price changes for each of %d SKUs", len(skus))

	// One delivery per SKU, with its latest change.
	got := map[string]priceChange{}
	timeout := time.After(MergeWindow + 5*time.Second)
	for len(got) < len(skus) {
		select {
		case pc := <-delivered:
			if _, twice := got[pc.SKU]; twice {
				return fmt.Errorf("%s delivered twice", pc.SKU)
			}
			got[pc.SKU] = pc
		case <-timeout:
			return fmt.Errorf("only %d of %d SKUs delivered", len(got), len(skus))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, sku := range skus {
		if got[sku] != last[sku] {
			return fmt.Errorf("%s delivered with %+v, want the latest change %+v", sku, got[sku], last[sku])
		}
	}
	say("result: %d changes sent -> %d deliveries, each with its SKU's latest price", 5*len(skus), len(got))
	return nil
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
