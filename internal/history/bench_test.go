package history_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/history"
)

// What counting costs a client per event (a send, or a delivery's end with
// its handler time), from many goroutines at once: go test -bench Count
// -run ^$ ./internal/history/.
func BenchmarkCount(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: no flush in an hour
	defer rdb.Close()
	r := history.New(rdb, history.Config{Prefix: "bench", Retention: time.Hour, Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	// Started, as a consuming client is: its ticker keeps the clock.
	r.StartWorker(history.NewWorker(func() ([]string, int) { return nil, 0 }))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.End("orders", time.Millisecond, history.Completed, -1)
		}
	})
	b.StopTimer()
	r.Close(context.Background())
}
