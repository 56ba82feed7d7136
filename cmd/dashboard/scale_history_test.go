package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/topic"
)

// TestHistoryAPIScale times api/history on 11 topics that each have 72 h
// of history with traffic in every minute (a real client's minute hash,
// copied to every minute: the worst case for the read), and fails when a
// read of the whole 72 h of every topic takes more than historyBudget.
// It logs each time and size (go test -v). Skipped with -short, and with
// -race (timings).
// historyBudget bounds one read of api/history in TestHistoryAPIScale:
// the charts' first load.
const historyBudget = 3 * time.Second

func TestHistoryAPIScale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timings: go test -v -run TestHistoryAPIScale ./dashboard/, without -race")
	}
	e := newEnv(t)
	ctx := context.Background()
	orders := e.topic("orders", topic.FixedTime, 4)
	runFleetTraffic(t, e.rdb, e.prefix, orders, 40, 3)
	now := time.Now().Truncate(time.Minute)
	var sample map[string]string
	for m := now.Add(-5 * time.Minute); !m.After(now); m = m.Add(time.Minute) {
		h, err := e.rdb.HGetAll(ctx, history.Key(e.prefix, "orders", m)).Result()
		require.NoError(t, err)
		if len(h) > 0 {
			sample = h
		}
	}
	require.NotEmpty(t, sample)
	t.Logf("a minute's hash: %d fields", len(sample))
	const topics = 10
	for j := range topics {
		name := fmt.Sprintf("t%02d", j)
		e.send(e.topic(name, topic.FixedTime, 4), "x", "x")
		pipe := e.rdb.Pipeline()
		for i := range 72 * 60 {
			k := history.Key(e.prefix, name, now.Add(-time.Duration(i)*time.Minute))
			pipe.HSet(ctx, k, sample)
			pipe.Expire(ctx, k, time.Hour)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
	}
	for _, q := range []string{"range=1h", "range=24h", "range=72h", "range=72h&topic=t00",
		fmt.Sprintf("range=72h&since=%d", now.Add(-30*time.Minute).UnixMilli()), fmt.Sprintf("range=1h&since=%d", now.UnixMilli())} {
		var best time.Duration
		var size int
		for k := range 3 {
			start := time.Now()
			code, _, body := e.do(http.MethodGet, "api/history?"+q, nil, nil)
			d := time.Since(start)
			require.Equal(t, 200, code)
			if k == 0 || d < best {
				best = d
			}
			size = len(body)
		}
		t.Logf("api/history?%s (%d topics with 72 h of history): best of 3 %v, %d bytes", q, topics+1, best.Round(time.Millisecond), size)
		require.Less(t, best, historyBudget, q)
	}
}
