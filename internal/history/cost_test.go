package history_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// commandUsec reads INFO commandstats: calls and µs of each command.
func commandUsec(t *testing.T, info string) (calls, usec map[string]int64) {
	calls, usec = map[string]int64{}, map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls[name] = n
			case "usec":
				usec[name] = n
			}
		}
	}
	return calls, usec
}

// What one topic busy every minute of a day costs Redis: every flush (6 a
// minute, each of the 27 fields and the expiry) written through a
// Recorder, then the memory of the day's 1,440 keys and the CPU Redis
// spent on the commands. The figures are logged (docs/design.md quotes
// them); the bounds only catch an order-of-magnitude regression.
func TestCostPerTopicDay(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a day of history")
	}
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	prefix := "cost"
	before, err := rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	day := time.Now().Truncate(time.Minute).Add(-24 * time.Hour)
	const flushesPerMinute = 6
	for m := range 24 * 60 {
		minute := day.Add(time.Duration(m) * time.Minute)
		key := history.Key(prefix, "orders", minute)
		pipe := rdb.Pipeline()
		for range flushesPerMinute {
			for _, f := range history.Fields() {
				pipe.HIncrBy(ctx, key, f, 17)
			}
			pipe.ExpireAt(ctx, key, minute.Add(history.DefaultRetention))
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
	}
	after, err := rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	calls, usec := commandUsec(t, stats)
	used := func(info string) int64 {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return 0
	}
	mem := used(after) - used(before)
	keyMem, err := rdb.MemoryUsage(ctx, history.Key(prefix, "orders", day)).Result()
	require.NoError(t, err)
	cpu := time.Duration(usec["hincrby"]+usec["expireat"]) * time.Microsecond
	t.Logf("one topic-day: %d keys, used_memory +%d bytes (%.0f bytes/key; MEMORY USAGE of one: %d); %d HINCRBY + %d EXPIREAT in %d flushes, Redis CPU %v (%.2f µs/command)",
		24*60, mem, float64(mem)/(24*60), keyMem, calls["hincrby"], calls["expireat"], 24*60*flushesPerMinute, cpu,
		float64(cpu.Microseconds())/float64(calls["hincrby"]+calls["expireat"]))
	require.Less(t, mem, int64(4<<20), "memory of a topic-day")
	require.Less(t, cpu, 10*time.Second, "Redis CPU of a topic-day")
	ttl, err := rdb.TTL(ctx, history.Key(prefix, "orders", day)).Result()
	require.NoError(t, err)
	require.InDelta(t, (48 * time.Hour).Seconds(), ttl.Seconds(), 120, "a minute expires the retention after it started")
}
