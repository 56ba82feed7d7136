// Command batchcost measures the Redis CPU per message of fetch.lua and
// ack.lua by call size, as the consumer issues them on a single node: one
// fetch call across every slot of a FixedTime topic, then ack calls across
// slots. It needs a Redis it may flush (run.sh starts one):
//
//	go run ./luacost/batchcost -redis 127.0.0.1:6399
//
// Each row loads -n due messages with SendBatch (1,000 per call, due in
// the same few milliseconds, so scores tie across slots as in the bench's
// consume case), fetches them all and acks them all: the fetch rows with
// calls of each -fetch size (acks at the largest -ack size), the ack rows
// with calls of each -ack size (fetches at the largest -fetch size). Redis
// CPU is INFO cpu (user + sys) across the phase, divided by the messages.
// Everything fetched waits in prepare until the acks, so prepare is larger
// than in a running consumer.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

func main() {
	addr := flag.String("redis", "", "address of a Redis this may flush (required)")
	n := flag.Int("n", 60000, "messages per row")
	nslots := flag.Int("slots", 16, "slots of the topic")
	fetches := flag.String("fetch", "16,64,256,1024", "messages per fetch call")
	acks := flag.String("ack", "8,32,128", "deliveries per ack call")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "batchcost: -redis is required")
		os.Exit(2)
	}
	if err := run(*addr, *n, *nslots, ints(*fetches), ints(*acks)); err != nil {
		fmt.Fprintln(os.Stderr, "batchcost:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "batchcost: bad size %q\n", f)
			os.Exit(2)
		}
		out = append(out, v)
	}
	return out
}

type fetched struct {
	group int
	id    string
	token int64
}

func run(addr string, n, nslots int, fetchSizes, ackSizes []int) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	tp, err := topic.New("cost", topic.FixedTime, nslots)
	if err != nil {
		return err
	}
	keys := make([]keyspace.Keys, nslots)
	for i := range keys {
		keys[i] = keyspace.KeysFor("bc", tp, i)
	}
	fmt.Printf("Redis CPU per message, %d messages, FixedTime topic of %d slots, one call across all slots:\n", n, nslots)
	// phase loads n messages, fetches them f a call and acks them a a call,
	// and returns the Redis CPU per message of the fetches and of the acks.
	phase := func(f, a int) (fetchUs, ackUs float64, err error) {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return 0, 0, err
		}
		if err := load(ctx, rdb, tp, n); err != nil {
			return 0, 0, err
		}
		c0, err := cpu(ctx, rdb)
		if err != nil {
			return 0, 0, err
		}
		got, err := fetchAll(ctx, rdb, keys, n, f)
		if err != nil {
			return 0, 0, err
		}
		c1, err := cpu(ctx, rdb)
		if err != nil {
			return 0, 0, err
		}
		if err := ackAll(ctx, rdb, keys, got, a); err != nil {
			return 0, 0, err
		}
		c2, err := cpu(ctx, rdb)
		if err != nil {
			return 0, 0, err
		}
		per := func(d float64) float64 { return d * 1e6 / float64(len(got)) }
		return per(c1 - c0), per(c2 - c1), nil
	}
	for _, f := range fetchSizes {
		us, _, err := phase(f, ackSizes[len(ackSizes)-1])
		if err != nil {
			return err
		}
		fmt.Printf("  fetch.lua, %5d messages a call: %5.1f µs\n", f, us)
	}
	for _, a := range ackSizes {
		_, us, err := phase(fetchSizes[len(fetchSizes)-1], a)
		if err != nil {
			return err
		}
		fmt.Printf("  ack.lua,   %5d deliveries a call: %5.1f µs\n", a, us)
	}
	return nil
}

func load(ctx context.Context, rdb *redis.Client, tp topic.Topic, n int) error {
	c, err := rmq.New(rdb, rmq.WithPrefix("bc"))
	if err != nil {
		return err
	}
	p := c.Producer()
	for i := 0; i < n; i += 1000 {
		b := make([]producer.BatchMessage, min(1000, n-i))
		for j := range b {
			b[j] = producer.BatchMessage{Body: []byte(fmt.Sprintf("%0128d", i+j)), At: time.Now()}
		}
		if _, err := p.SendBatch(ctx, tp, b); err != nil {
			return err
		}
	}
	return nil
}

func fetchAll(ctx context.Context, rdb *redis.Client, keys []keyspace.Keys, n, size int) ([]fetched, error) {
	var got []fetched
	for len(got) < n {
		call := scripts.FetchCall{TimeBased: true, N: size, LeaseSec: 600, Window: (size+len(keys)-1)/len(keys) + 1}
		for _, k := range keys {
			call.Groups = append(call.Groups, scripts.FetchGroup{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: size})
		}
		ks, args := call.Args()
		vals, err := scripts.Fetch.Run(ctx, rdb, ks, args...).Slice()
		if err != nil {
			return nil, err
		}
		r, err := scripts.ParseFetchReply(vals)
		if err != nil {
			return nil, err
		}
		if len(r.Msgs) == 0 {
			return nil, fmt.Errorf("fetch moved nothing after %d of %d", len(got), n)
		}
		for _, m := range r.Msgs {
			got = append(got, fetched{m.Group, m.ID, m.Token})
		}
	}
	return got, nil
}

func ackAll(ctx context.Context, rdb *redis.Client, keys []keyspace.Keys, got []fetched, size int) error {
	for i := 0; i < len(got); i += size {
		by := make([][]fetched, len(keys))
		for _, m := range got[i:min(i+size, len(got))] {
			by[m.group] = append(by[m.group], m)
		}
		var ks []string
		args := []any{""}
		for g, k := range keys {
			ks = append(ks, k.Store, k.Prepare, k.Msg, k.Wake, k.Store, k.Dead) // a time-based topic names its store as the delayed key
			args = append(args, len(by[g]))
		}
		for _, ms := range by {
			for _, m := range ms {
				args = append(args, m.id, m.token)
			}
		}
		res, err := scripts.Ack.Run(ctx, rdb, ks, args...).Int64Slice()
		if err != nil {
			return err
		}
		for _, r := range res {
			if r != 1 {
				return fmt.Errorf("an ack was refused")
			}
		}
	}
	return nil
}

func cpu(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			total += f
		}
	}
	return total, nil
}
