// Command album runs a flow: 100 image resizes, then one album job that
// runs after all of them with their results (producer.SendFlow).
//
// The album is the flow's parent: it is not deliverable until every one of
// its 100 children (the resizes) finished, and then its handler reads
// their outcomes and results with Message.Children. The resizes run on
// eight handlers at once, in any order; the album runs exactly once,
// after the last of them.
//
// It talks to the Redis that REDIS_URL names (default 127.0.0.1:6379):
//
//	REDIS_URL=redis://127.0.0.1:6379 go run ./examples/album
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

var (
	resizes = topic.MustNew("resizes", topic.Priority, 8)
	albums  = topic.MustNew("albums", topic.FixedTime, 4)
)

// images is how many resize jobs the album waits for.
const images = 100

func main() {
	opts, err := redisOptions(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "album:", err)
		os.Exit(2)
	}
	rdb := redis.NewClient(opts)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The prefix keeps the example's keys apart from any other RMQ user of
	// this Redis; the run's time keeps the ids of two runs apart.
	err = run(ctx, rdb, "rmq-example", fmt.Sprintf("album-%d", time.Now().UnixMilli()), os.Stdout)
	stop()
	rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "album:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rdb *redis.Client, prefix, albumID string, out io.Writer) (err error) {
	start := time.Now()
	lg := log.New(out, "", 0)
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

	var resized atomic.Int64
	err = c.Register(resizes, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		// The "resized image": where it went, as the job's result.
		resized.Add(1)
		return m.SetResult([]byte("thumbs/" + string(m.Body) + ".jpg"))
	}), consumer.WithConcurrency(8))
	if err != nil {
		return err
	}
	built := make(chan string, 1)
	err = c.Register(albums, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		kids, err := m.Children(ctx)
		if err != nil {
			return err
		}
		pages := 0
		for _, k := range kids {
			if k.State == "completed" {
				pages++
			}
		}
		say("album %s: built from %d images after %d resizes (first %s, last %s)",
			m.ID, pages, resized.Load(), kids[0].Result, kids[len(kids)-1].Result)
		built <- m.ID
		return nil
	}))
	if err != nil {
		return err
	}

	// One flow: the album and its 100 children, written all or nothing.
	album := producer.FlowNode{Topic: albums, Body: []byte("summer"), Options: []producer.SendOption{producer.WithKey(albumID)}}
	for i := range images {
		name := fmt.Sprintf("%s-img-%03d", albumID, i)
		album.Children = append(album.Children, producer.FlowNode{
			Topic: resizes, Body: []byte(name), Priority: 100, Options: []producer.SendOption{producer.WithKey(name)},
		})
	}
	id, err := c.Producer().SendFlow(ctx, album)
	if err != nil {
		return err
	}
	say("sent album %s with %d resize jobs; starting the workers", id, images)
	if err := c.Start(ctx); err != nil {
		return err
	}
	select {
	case <-built:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no album after 30s (%d resizes done)", resized.Load())
	case <-ctx.Done():
		return ctx.Err()
	}
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
