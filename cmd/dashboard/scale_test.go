package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// pageBudget is the most server time a page may take on the big topic.
const pageBudget = 300 * time.Millisecond

// TestPagesAnswerFastOnABigTopic loads one topic with 1,000,000 waiting
// and 100,000 dead messages through the library (SendBatch, and a real
// consumer failing the dead ones) on a server of its own, then times every
// page in the handler (server time, no network) and fails when the slowest
// of five runs of a page takes more than 300 ms. Sizes can be lowered with
// RMQ_SCALE_WAITING / RMQ_SCALE_DEAD for a quick look. It is skipped with
// -short, and with -race unless RMQ_SCALE=1: the race detector makes the
// load take minutes and the timings meaningless (run it without -race).
func TestPagesAnswerFastOnABigTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 1.1M messages")
	}
	if raceEnabled && os.Getenv("RMQ_SCALE") != "1" {
		t.Skip("timings need a build without -race: go test -run TestPagesAnswerFast ./dashboard/")
	}
	waiting, dead := envInt(t, "RMQ_SCALE_WAITING", 1_000_000), envInt(t, "RMQ_SCALE_DEAD", 100_000)
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	tp, err := topic.New("big", topic.FixedTime, 16)
	require.NoError(t, err)
	prod := rmqtest.Producer(t, rdb, prefix)
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(prefix))

	start := time.Now()
	// The dead first, all due now, failed once by a real consumer.
	send(t, prod, tp, 0, dead, func(int) time.Time { return time.Now().Add(-time.Second) })
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return errors.New("downstream said 503 for " + m.ID)
	}), consumer.WithMaxRetries(0), consumer.WithConcurrency(256), consumer.WithPrefetch(1024),
		consumer.WithDeadRetention(0, 0)))
	require.NoError(t, c.Start(ctx))
	redistest.PollWithin(t, 5*time.Minute, func() error {
		st, err := insp.Stats(ctx, tp)
		require.NoError(t, err)
		if st.Dead != int64(dead) {
			return fmt.Errorf("only %d dead", st.Dead)
		}
		return nil
	})
	closeClient(t, c)
	loadedDead := time.Since(start)
	// Then the waiting, due over the next 30 days (some overdue).
	now := time.Now()
	send(t, prod, tp, dead, waiting, func(j int) time.Time {
		return now.Add(-time.Minute + time.Duration(j)*30*24*time.Hour/time.Duration(waiting))
	})
	st, err := insp.Stats(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(waiting), st.Store)
	require.Equal(t, int64(dead), st.Dead)
	t.Logf("loaded %d dead in %v and %d waiting in %v", dead, loadedDead.Round(time.Millisecond), waiting, (time.Since(start) - loadedDead).Round(time.Millisecond))

	h := dashboard.New(rdb, dashboard.WithKeyPrefix(prefix), dashboard.WithLogger(slog.New(slog.DiscardHandler)))
	// Cursors of the second pages come from the first page itself.
	first := serve(t, h, "/topic?name=big")
	q := func(page, id string) string {
		u, err := url.Parse(link(t, page, id))
		require.NoError(t, err)
		return "/topic?" + u.RawQuery
	}
	deadID := fmt.Sprintf("m%07d", dead/2)
	waitID := fmt.Sprintf("m%07d", dead+waiting/2)
	pages := []string{
		"/",
		"/api/overview",
		"/topic?name=big",
		q(first, "waiting-next"),
		q(first, "dead-next"),
		"/message?topic=big&id=" + deadID,
		"/message?topic=big&id=" + waitID,
		"/search?id=" + waitID,
	}
	var slow []string
	for _, p := range pages {
		var times []time.Duration
		for range 5 {
			t0 := time.Now()
			serve(t, h, p)
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		t.Logf("%-60.60s median %7.2f ms  max %7.2f ms", p, ms(times[2]), ms(times[4]))
		if times[4] > pageBudget {
			slow = append(slow, p)
		}
	}
	if raceEnabled {
		t.Logf("race detector on: timings reported, not checked")
		return
	}
	require.Empty(t, slow, "pages slower than %v", pageBudget)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// serve runs one GET through the handler and returns the body; a redirect
// (search) counts as an answer.
func serve(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	require.Contains(t, []int{http.StatusOK, http.StatusSeeOther}, w.Code, "%s: %s", path, w.Body.String())
	return w.Body.String()
}

// send stores messages m<from>..m<from+n-1> in batches of 10,000.
func send(t *testing.T, prod *producer.Producer, tp topic.Topic, from, n int, at func(j int) time.Time) {
	t.Helper()
	const batch = 10_000
	body := []byte(`{"order":12345,"customer":"c-778","amount":"42.10","currency":"EUR"}`)
	for lo := 0; lo < n; lo += batch {
		msgs := make([]producer.BatchMessage, 0, batch)
		for j := lo; j < min(n, lo+batch); j++ {
			msgs = append(msgs, producer.BatchMessage{Key: fmt.Sprintf("m%07d", from+j), Body: body, At: at(j)})
		}
		_, err := prod.SendBatch(context.Background(), tp, msgs)
		require.NoError(t, err)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}
