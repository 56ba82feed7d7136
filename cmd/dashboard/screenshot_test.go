package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestScreenshots renders the overview, a topic and a message page of
// realistic demo data in the browser and writes them to docs/screenshots.
// It runs only when RMQ_SCREENSHOTS=1, so ordinary test runs never rewrite
// the committed images.
func TestScreenshots(t *testing.T) {
	if os.Getenv("RMQ_SCREENSHOTS") != "1" {
		t.Skip("set RMQ_SCREENSHOTS=1 to regenerate docs/screenshots")
	}
	ctx := newBrowser(t)
	ctr := dashboard.NewCounters()
	e := newEnv(t, dashboard.WithPageSize(12), dashboard.WithCounters(ctr))
	demo(t, e)

	// Keep prices moving while the overview samples them, through a client
	// the counters observe: sends, acks and a few retries.
	prices := e.topic("prices.merge", topic.RangeMerge, 16)
	live, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)), rmq.WithObserver(ctr))
	require.NoError(t, err)
	var n atomic.Int64
	require.NoError(t, live.Register(prices, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		if n.Add(1)%17 == 0 {
			return errors.New("stale price")
		}
		return nil
	}), consumer.WithRetryBackoff(func(int) time.Duration { return time.Second })))
	require.NoError(t, live.Start(context.Background()))
	t.Cleanup(func() { closeClient(t, live) })
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; bg.Err() == nil; j++ {
			var batch []producer.BatchMessage
			for k := range 20 + j%7*15 {
				batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("sku-%d-%d", j, k), Body: []byte(`{"sku":1}`), TimeRange: time.Duration(k%10) * 100 * time.Millisecond})
			}
			_, _ = live.Producer().SendBatch(bg, prices, batch)
			select {
			case <-bg.Done():
			case <-time.After(400 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()

	dir := filepath.Join("..", "docs", "screenshots")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	shot := func(name, path string, wait chromedp.Action[chromedp.Void]) {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(sctx, chromedp.Navigate(e.srv.URL+mount+"/"+path), wait))
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
	shot("topic.png", "topic?name=orders.timeout", chromedp.WaitVisible(chromedp.CSS("#due-histogram")))
	shot("message.png", "message?topic=invoices.render&id=inv-2026-0117", chromedp.WaitVisible(chromedp.CSS("#body")))
	// The overview last, so that the lateness histogram has seen a few
	// seconds of deliveries: what the picture is to show, not a wait for
	// an event.
	time.Sleep(3 * time.Second)
	shot("overview.png", "", chromedp.Poll[chromedp.Void](`Number(document.getElementById("charts").dataset.samples || 0) >= 5`, chromedp.WithPollingTimeout(40*time.Second)))
}

// demo fills four topics the way a small shop's queues might look.
func demo(t *testing.T, e *env) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()

	orders := e.topic("orders.timeout", topic.FixedTime, 8)
	// The dead first: the failing consumer that makes them takes whatever is
	// due.
	var dead []string
	for j := range 9 {
		dead = append(dead, fmt.Sprintf("ord-%06d", 90000+j), fmt.Sprintf(`{"order_id":"ord-%06d","customer":"cus-%04d","total":"19.90","currency":"EUR"}`, 90000+j, j*37))
	}
	e.makeDead(orders, "payments: POST /v1/orders/cancel: 503 Service Unavailable", dead...)
	var batch []producer.BatchMessage
	for j := range 640 {
		at := now.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		switch {
		case j < 14:
			at = now.Add(-time.Duration(rng.Int64N(int64(40 * time.Second)))) // a consumer fell behind
		case j%9 == 0:
			at = now.Add(time.Duration(rng.Int64N(int64(20 * time.Hour))))
		case j%4 == 0:
			at = now.Add(time.Duration(rng.Int64N(int64(time.Minute))))
		}
		body := fmt.Sprintf(`{"order_id":"ord-%06d","customer":"cus-%04d","total":"%d.%02d","currency":"EUR","cancel_if_unpaid":true}`, 100000+j, rng.IntN(9000), 5+rng.IntN(300), rng.IntN(100))
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("ord-%06d", 100000+j), Body: []byte(body), At: at})
	}
	_, err := e.prod.SendBatch(ctx, orders, batch)
	require.NoError(t, err)

	emails := e.topic("emails.send", topic.Priority, 4)
	e.makeDead(emails, "smtp: 451 4.7.1 greylisted, try again later",
		"mail-bounce-1", `{"to":"old@example.org","template":"welcome"}`,
		"mail-bounce-2", `{"to":"nobody@example.net","template":"receipt"}`)
	batch = batch[:0]
	for j := range 180 {
		p := []int64{20, 50, 100, 500, 1000}[rng.IntN(5)]
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("mail-%05d", j), Priority: p,
			Body: []byte(fmt.Sprintf(`{"to":"user%d@example.com","template":"receipt","locale":"de"}`, j))})
	}
	_, err = e.prod.SendBatch(ctx, emails, batch)
	require.NoError(t, err)

	prices := e.topic("prices.merge", topic.RangeMerge, 16)
	batch = batch[:0]
	for j := range 900 {
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("sku-%05d", j), TimeRange: time.Duration(rng.Int64N(int64(5 * time.Minute))),
			Body: []byte(fmt.Sprintf(`{"sku":"sku-%05d","price":"%d.99"}`, j, rng.IntN(90)))})
	}
	_, err = e.prod.SendBatch(ctx, prices, batch)
	require.NoError(t, err)

	invoices := e.topic("invoices.render", topic.FixedTime, 4)
	e.makeDead(invoices, "pdf renderer: template \"invoice-v3\": line 42: <no value> for .Customer.VATID",
		"inv-2026-0117", `{"invoice":"inv-2026-0117","customer":{"name":"Müller & Söhne GmbH","vat_id":null},"lines":[{"sku":"sku-00042","qty":3,"price":"12.99"},{"sku":"sku-00108","qty":1,"price":"249.00"}],"due":"2026-12-01"}`,
		"inv-2026-0118", `{"invoice":"inv-2026-0118","customer":{"name":"ACME Ltd"},"lines":[]}`)
	batch = batch[:0]
	for j := range 60 {
		batch = append(batch, producer.BatchMessage{Key: fmt.Sprintf("inv-2026-%04d", 200+j), At: now.Add(time.Duration(1+rng.IntN(6*24)) * time.Hour),
			Body: []byte(fmt.Sprintf(`{"invoice":"inv-2026-%04d","lines":3}`, 200+j))})
	}
	_, err = e.prod.SendBatch(ctx, invoices, batch)
	require.NoError(t, err)

	// Three deliveries of orders in flight, held by a slow handler until the
	// test ends.
	hold := make(chan struct{})
	e.client(orders, func(ctx context.Context, m *consumer.Message) error {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return nil
	}, consumer.WithConcurrency(3), consumer.WithPrepareTimeout(2*time.Minute))
	t.Cleanup(func() { close(hold) })
	e.waitFor("3 in flight", func() bool { return e.stats(orders).Prepare == 3 })
}
