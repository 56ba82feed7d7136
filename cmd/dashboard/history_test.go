package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// histPoint is a bucket of api/history as the charts read it.
type histPoint struct {
	T                                                             int64
	Sent, Completed, Retried, Dead, Expired, Cancelled, Forwarded int64
	HandlerP99Ms                                                  float64 `json:"handler_p99_ms"`
}

type histAnswer struct {
	Range  string
	StepMs int64 `json:"step_ms"`
	FromMs int64 `json:"from_ms"`
	NowMs  int64 `json:"now_ms"`
	Topics []struct {
		Name   string
		Points []histPoint
		Error  string
	}
	Total []histPoint
}

func sum(ps []histPoint) (s histPoint) {
	for _, p := range ps {
		s.Sent += p.Sent
		s.Completed += p.Completed
		s.Retried += p.Retried
		s.Dead += p.Dead
		s.Cancelled += p.Cancelled
		s.HandlerP99Ms = max(s.HandlerP99Ms, p.HandlerP99Ms)
	}
	return s
}

// runFleetTraffic sends n messages of orders (and `bad` more that die at
// once) through a client of their own that consumes them with a handler
// of at least 2 ms, waits until every one is handled, and closes the
// client, which writes its history to Redis.
func runFleetTraffic(t *testing.T, rdb redis.UniversalClient, prefix string, orders topic.Topic, n, bad int) {
	t.Helper()
	ctx := context.Background()
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	var handled atomic.Int64
	require.NoError(t, c.Register(orders, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		defer handled.Add(1)
		if strings.HasPrefix(m.ID, "bad-") {
			return errors.New("refused")
		}
		// A duration under test: the handler time the history's
		// histogram measures.
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}), consumer.WithMaxRetries(0), consumer.WithConcurrency(4)))
	require.NoError(t, c.Start(ctx))
	var batch []producer.BatchMessage
	for j := range n {
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("ord-%d", j), Body: []byte("x"), At: time.Now()})
	}
	for j := range bad {
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("bad-%d", j), Body: []byte("x"), At: time.Now()})
	}
	_, err = c.Producer().SendBatch(ctx, orders, batch)
	require.NoError(t, err)
	redistest.Poll(t, func() error {
		if got := handled.Load(); got != int64(n+bad) {
			return fmt.Errorf("%d of %d handled", got, n+bad)
		}
		return nil
	})
	closeClient(t, c) // writes the counts not yet written
}

func (e *env) history(query string) histAnswer {
	e.t.Helper()
	var h histAnswer
	require.NoError(e.t, json.Unmarshal([]byte(e.get("api/history?"+query)), &h))
	return h
}

// api/history serves what a client (closed by now) counted: per topic and
// in total, in buckets of the range asked for; since= asks for the newest
// buckets only.
func TestHistoryAPI(t *testing.T) {
	e := newEnv(t)
	orders := e.topic("orders", topic.FixedTime, 4)
	runFleetTraffic(t, e.rdb, e.prefix, orders, 40, 3)
	e.send(e.topic("idle", topic.Priority, 2), "i1", "x") // through e.prod, which counts nothing

	h := e.history("range=1h")
	assert.Equal(t, "1h", h.Range)
	assert.Equal(t, int64(60_000), h.StepMs)
	require.Len(t, h.Topics, 2)
	byName := map[string][]histPoint{}
	for _, tp := range h.Topics {
		assert.Empty(t, tp.Error)
		byName[tp.Name] = tp.Points
	}
	s := sum(byName["orders"])
	assert.Equal(t, histPoint{Sent: 43, Completed: 40, Dead: 3, HandlerP99Ms: s.HandlerP99Ms}, s)
	assert.GreaterOrEqual(t, s.HandlerP99Ms, 2.0, "the handlers took 2 ms or more")
	assert.Equal(t, histPoint{}, sum(byName["idle"]))
	tot := sum(h.Total)
	assert.Equal(t, int64(43), tot.Sent)
	assert.Equal(t, int64(40), tot.Completed)
	for _, p := range byName["orders"] {
		assert.Zero(t, p.T%h.StepMs, "buckets start on the step")
		assert.GreaterOrEqual(t, p.T, h.FromMs)
	}

	d := e.history("range=72h&topic=orders")
	assert.Equal(t, int64(30*60_000), d.StepMs)
	require.Len(t, d.Topics, 1)
	assert.Nil(t, d.Total, "one topic has no total")
	assert.Equal(t, int64(43), sum(d.Topics[0].Points).Sent)
	assert.LessOrEqual(t, len(d.Topics[0].Points), 145)

	recent := e.history(fmt.Sprintf("range=1h&topic=orders&since=%d", h.NowMs))
	assert.LessOrEqual(t, len(recent.Topics[0].Points), 1, "the newest bucket only")
	assert.Equal(t, h.NowMs/60_000*60_000, recent.FromMs)

	code, _, _ := e.do(http.MethodGet, "api/history?topic=nope", nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	code, _, _ = e.do(http.MethodGet, "api/history?since=soon", nil, nil)
	assert.Equal(t, http.StatusBadRequest, code)

	page := e.get("")
	assert.Contains(t, page, `id="history" data-src="api/history" data-range="1h"`)
	assert.Contains(t, page, `<a href="./?range=24h#history" data-range="24h">24h</a>`)
	page = e.get("topic?name=orders&range=72h")
	assert.Contains(t, page, `id="history" data-src="api/history?topic=orders" data-range="72h"`)
	assert.Contains(t, page, `data-range="72h" class="on">72h</a>`)
}

// The Workers page lists every running client, with its topics and
// concurrency; a closed client leaves it.
func TestWorkersPage(t *testing.T) {
	e := newEnv(t)
	orders := e.topic("orders", topic.FixedTime, 4)
	emails := e.topic("emails", topic.Priority, 2)
	a := e.client(orders, func(context.Context, *consumer.Message) error { return nil }, consumer.WithConcurrency(3))
	b := e.client(emails, func(context.Context, *consumer.Message) error { return nil }, consumer.WithConcurrency(2))
	var ws []rmq.WorkerInfo
	e.waitFor("2 workers", func() bool {
		var err error
		ws, err = e.insp.Workers(context.Background())
		return err == nil && len(ws) == 2
	})
	page := e.get("workers")
	assert.Contains(t, page, `<b id="c-workers">2</b>`)
	for _, w := range ws {
		assert.Contains(t, page, `<tr data-worker="`+w.ID+`">`)
	}
	assert.Contains(t, page, `<a class="topic" href="topic?name=orders">orders</a>`)
	assert.Contains(t, page, `<a class="topic" href="topic?name=emails">emails</a>`)
	assert.Contains(t, page, fmt.Sprintf(`<td class="n">%d</td>`, ws[0].PID))
	assert.Contains(t, navOf(t, e.get("")), `<a href="workers" id="workers-link">Workers</a>`)

	closeClient(t, b)
	page = e.get("workers")
	assert.Contains(t, page, `<b id="c-workers">1</b>`, "a closed client leaves at once")
	_ = a
}

// A topic's page names the running clients that consume it, and only
// those.
func TestTopicPageNamesItsWorkers(t *testing.T) {
	e := newEnv(t)
	orders := e.topic("orders", topic.FixedTime, 4)
	emails := e.topic("emails", topic.Priority, 2)
	e.send(emails, "m", "x")
	e.send(orders, "o", "x")
	assert.Contains(t, e.get("topic?name=orders"), "No running client consumes orders")
	e.client(orders, func(context.Context, *consumer.Message) error { return nil }, consumer.WithConcurrency(3))
	e.waitFor("1 worker", func() bool {
		ws, err := e.insp.Workers(context.Background())
		return err == nil && len(ws) == 1
	})
	ws, err := e.insp.Workers(context.Background())
	require.NoError(t, err)
	page := e.get("topic?name=orders")
	assert.Contains(t, page, fmt.Sprintf(`Consumed by 1 running client: <span class="worker">%s:%d (0 of %d handlers busy)</span>`,
		ws[0].Host, ws[0].PID, ws[0].Concurrency))
	assert.Contains(t, e.get("topic?name=emails"), "No running client consumes emails")
}
