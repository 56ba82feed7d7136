package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

func TestCountersFeedRatesAndLateness(t *testing.T) {
	ctr := dashboard.NewCounters()
	e := newEnv(t, dashboard.WithCounters(ctr))
	tp := e.topic("orders", topic.FixedTime, 2)
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)), rmq.WithObserver(ctr))
	require.NoError(t, err)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if strings.HasPrefix(m.ID, "bad") {
			return errors.New("nope")
		}
		return nil
	}), consumer.WithMaxRetries(1), consumer.WithRetryBackoff(func(int) time.Duration { return 0 })))
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { closeClient(t, c) })
	for j := range 4 {
		_, err := c.Producer().SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey(fmt.Sprint("good", j)))
		require.NoError(t, err)
	}
	for j := range 2 {
		_, err := c.Producer().SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey(fmt.Sprint("bad", j)))
		require.NoError(t, err)
	}
	e.waitFor("2 dead", func() bool { return e.stats(tp).Dead == 2 })
	e.waitFor("4 acked", func() bool { return e.stats(tp).Store == 0 && e.stats(tp).Prepare == 0 })

	var snap struct {
		Topics []struct{ Sent, Acked, Retried, Died int64 }
	}
	e.waitFor("counts", func() bool {
		require.NoError(t, json.Unmarshal([]byte(e.get("api/overview")), &snap))
		return snap.Topics[0].Acked == 4 && snap.Topics[0].Died == 2
	})
	assert.Equal(t, int64(6), snap.Topics[0].Sent)
	assert.Equal(t, int64(2), snap.Topics[0].Retried) // each bad one once, then dead

	page := e.get("")
	assert.Contains(t, page, `data-series="acked"`)
	i := strings.Index(page, `id="lateness"`)
	require.GreaterOrEqual(t, i, 0)
	total := 0
	for _, m := range regexp.MustCompile(`<span class="cnt">(\d+)</span>`).FindAllStringSubmatch(page[i:], -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	assert.Equal(t, 8, total, "every delivery of a time-based message: 4 good, 2 bad twice")
}

func TestWithoutCountersNoRateCharts(t *testing.T) {
	e := newEnv(t)
	page := e.get("")
	assert.NotContains(t, page, `data-series="acked"`)
	assert.NotContains(t, page, `id="lateness"`)
}

// latenessCounts reads the overview's firing-lateness histogram.
func latenessCounts(t *testing.T, page string) []int {
	t.Helper()
	i := strings.Index(page, `id="lateness"`)
	require.GreaterOrEqual(t, i, 0)
	var out []int
	for _, m := range regexp.MustCompile(`<span class="cnt">(\d+)</span>`).FindAllStringSubmatch(page[i:], -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// With LatenessFromFired, deliveries (here pushed ones) leave the
// lateness histogram alone and Fired fills it: a pull-only service
// reports only what came due while a caller waited.
func TestCountersLatenessFromFired(t *testing.T) {
	ctr := dashboard.NewCounters(dashboard.LatenessFromFired())
	e := newEnv(t, dashboard.WithCounters(ctr))
	tp := e.topic("orders", topic.FixedTime, 1)
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)), rmq.WithObserver(ctr))
	require.NoError(t, err)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })))
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { closeClient(t, c) })
	for j := range 3 {
		_, err := c.Producer().SendFixedTime(context.Background(), tp, []byte("x"), time.Now(), producer.WithKey(fmt.Sprint("m", j)))
		require.NoError(t, err)
	}
	e.waitFor("3 acked", func() bool {
		var snap struct{ Topics []struct{ Acked int64 } }
		require.NoError(t, json.Unmarshal([]byte(e.get("api/overview")), &snap))
		return snap.Topics[0].Acked == 3
	})
	assert.Equal(t, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, latenessCounts(t, e.get("")), "deliveries are not firings here")

	ctr.Fired("orders", 3*time.Millisecond)
	ctr.Fired("orders", -time.Millisecond)
	ctr.Fired("orders", 2*time.Second)
	assert.Equal(t, []int{1, 1, 0, 0, 0, 0, 0, 1, 0, 0}, latenessCounts(t, e.get("")))
}
