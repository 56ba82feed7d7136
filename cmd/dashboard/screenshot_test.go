package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/readmetest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// screenshots are the images of the dashboard the README and docs/*.md
// show, each made by a step of TestScreenshots. TestScreenshotsAreMade
// holds this list equal to the images the pages reference.
var screenshots = []struct {
	file string // under docs/screenshots
	path string // the page, relative to the dashboard's mount
	wait string // CSS of an element that shows the page is ready
}{
	{"topic.png", "topic?name=orders.timeout", "#due-histogram"},
	{"message.png", "message?topic=invoices.render&id=inv-2026-0117", "#body"},
	{"schedules.png", "schedules", "#schedules"},
	{"settings.png", "settings?topic=orders.timeout", "#settings-form"},
	{"finished.png", "finished?topic=invoices.render", "#finished"},
	{"workers.png", "workers", "#workers"},
	// Not last: its event stream must end (the next page) before the
	// server closes.
	{"events.png", "events?topic=invoices.render&from=start", `#feed tr[data-type="cancelled"]`},
	// The overview last, once its live charts have drawn five samples
	// (about 10 s of deliveries; see TestScreenshots).
	{"overview.png", "", "#charts"},
}

// TestScreenshots renders every page of screenshots from realistic demo
// data in a real headless Chromium. With RMQ_SCREENSHOTS=1 it writes them
// to docs/screenshots; otherwise it only checks that each step still
// renders its page, so ordinary test runs never rewrite the committed
// images.
func TestScreenshots(t *testing.T) {
	write := os.Getenv("RMQ_SCREENSHOTS") == "1"
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
	// Invoices rendered now: completed, with their results, kept by the
	// topic's retention (demoLife).
	invoices := e.topic("invoices.render", topic.FixedTime, 4)
	require.NoError(t, live.Register(invoices, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return m.SetResult([]byte(`{"pdf":"s3://invoices/2026/` + m.ID + `.pdf","pages":2}`))
	}), consumer.WithConcurrency(2)))
	require.NoError(t, live.Start(context.Background()))
	t.Cleanup(func() { closeClient(t, live) })
	demoSchedules(t, e, live)
	demoLife(t, e)
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

	root, err := readmetest.Root()
	require.NoError(t, err)
	dir := filepath.Join(root, "docs", "screenshots")
	for _, s := range screenshots {
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		wait := chromedp.WaitVisible(chromedp.CSS(s.wait))
		if s.file == "overview.png" {
			// The charts sample every 2 s: five samples show a few seconds
			// of deliveries, and the lateness histogram has seen them.
			// The history charts show what the live client wrote (every
			// 10 s) and the fleet's client of demoLife.
			wait = chromedp.Poll[chromedp.Void](`Number(document.getElementById("charts").dataset.samples || 0) >= 5 &&
				Number(document.getElementById("history").dataset.busy || 0) >= 2`, chromedp.WithPollingTimeout(75*time.Second))
		}
		began := time.Now()
		require.NoError(t, chromedp.Do(sctx, chromedp.Navigate(e.srv.URL+mount+"/"+s.path), wait), s.file)
		t.Logf("%s: ready after %v", s.file, time.Since(began).Round(time.Millisecond))
		shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
		cancel()
		require.NoError(t, err, s.file)
		img, err := png.Decode(bytes.NewReader(shot))
		require.NoError(t, err, s.file)
		if write {
			// Chromium compresses for speed; the committed file is for
			// size: the page's 256 most frequent colours (the rest, mostly
			// anti-aliased text edges, take the nearest), best compression.
			var small bytes.Buffer
			require.NoError(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&small, paletted(img)))
			require.NoError(t, os.WriteFile(filepath.Join(dir, s.file), small.Bytes(), 0o644))
			t.Logf("wrote docs/screenshots/%s (%d bytes)", s.file, small.Len())
		}
	}
}

// paletted returns img in a palette of its 256 most frequent colours.
func paletted(img image.Image) *image.Paletted {
	b := img.Bounds()
	count := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	colors := slices.Collect(maps.Keys(count))
	slices.SortFunc(colors, func(a, b color.RGBA) int {
		if c := count[b] - count[a]; c != 0 {
			return c
		}
		return int(a.R)<<16 | int(a.G)<<8 | int(a.B) - (int(b.R)<<16 | int(b.G)<<8 | int(b.B))
	})
	var pal color.Palette
	for _, c := range colors[:min(256, len(colors))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	index := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// Every image of docs/screenshots that README.md and docs/*.md show is one
// TestScreenshots makes, and it makes no other: a page cannot show a
// screenshot no test renders (which would go stale), and each image the
// test makes exists, committed.
func TestScreenshotsAreMade(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "README.md"))
	image := regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)
	var shown []string
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range image.FindAllStringSubmatch(string(text), -1) {
			path := filepath.Join(filepath.Dir(page), m[1])
			rel, err := filepath.Rel(filepath.Join(root, "docs", "screenshots"), path)
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(rel, ".."), "%s shows %s, outside docs/screenshots", page, m[1])
			if !slices.Contains(shown, rel) {
				shown = append(shown, rel)
			}
		}
	}
	var made []string
	for _, s := range screenshots {
		made = append(made, s.file)
		fi, err := os.Stat(filepath.Join(root, "docs", "screenshots", s.file))
		require.NoError(t, err, "run RMQ_SCREENSHOTS=1 go test -run TestScreenshots ./dashboard/ (from cmd)")
		require.Less(t, fi.Size(), int64(300_000), "%s: keep the committed images small", s.file)
	}
	slices.Sort(shown)
	slices.Sort(made)
	require.Equal(t, made, shown, "images the pages show, against those TestScreenshots makes")
}

// demoSchedules sets three schedules on c: one by a Berlin cron spec, one
// interval, one paused.
func demoSchedules(t *testing.T, e *env, c *rmq.Client) {
	t.Helper()
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	s := c.Schedules()
	for _, sc := range []rmq.Schedule{
		{Name: "invoices.nightly", Spec: "30 2 * * *", Location: berlin, Topic: e.topic("invoices.render", topic.FixedTime, 4),
			Body: []byte(`{"run":"nightly"}`), CatchUp: 2 * time.Hour},
		{Name: "emails.digest", Spec: "@every 1h", Topic: e.topic("emails.send", topic.Priority, 4), Priority: 50,
			Body: []byte(`{"template":"digest"}`)},
		{Name: "orders.weekly-audit", Spec: "0 4 * * 1", Topic: e.topic("orders.timeout", topic.FixedTime, 8),
			Body: []byte(`{"audit":"weekly"}`), Paused: true},
	} {
		require.NoError(t, s.Set(ctx, sc), sc.Name)
	}
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
	// At least three: the consumer may also hold a prefetch of the 14
	// overdue ones, leased, waiting for a free handler.
	e.waitFor("3 in flight", func() bool { return e.stats(orders).Prepare >= 3 })
}
