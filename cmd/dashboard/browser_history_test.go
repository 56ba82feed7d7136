package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// serveArg makes the test binary a dashboard process (TestMain): the
// arguments after it are the Redis address, the key prefix and the
// address to listen on.
const serveArg = "rmq-dashboard-serve"

// serveDashboard runs a dashboard on its own, as a host process would,
// until SIGTERM; it returns the exit code.
func serveDashboard(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "want REDIS-ADDR PREFIX LISTEN-ADDR")
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: args[0]})
	defer rdb.Close()
	mux := http.NewServeMux()
	mux.Handle(mount+"/", http.StripPrefix(mount, dashboard.New(rdb, dashboard.WithKeyPrefix(args[1]),
		dashboard.WithLogger(slog.New(slog.DiscardHandler)))))
	srv := &http.Server{Addr: args[2], Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

// startDashboardProcess starts the test binary as a dashboard process on
// addr and waits until it answers.
func startDashboardProcess(t *testing.T, redisAddr, prefix, addr string) *procutil.Proc {
	t.Helper()
	bin, err := os.Executable()
	require.NoError(t, err)
	p, err := procutil.StartReady(context.Background(), bin, []string{"-test.run=^$", serveArg, redisAddr, prefix, addr},
		t.TempDir(), filepath.Join(t.TempDir(), "dashboard.log"), 30*time.Second, 50*time.Millisecond, "an answer",
		func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+mount+"/api/overview", nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			return nil
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// TestBrowserHistoryAfterRestart: a client that has since closed handled
// 43 messages of orders; two clients of the fleet run on. The dashboard
// runs as a process of its own. In Chromium, its overview's history charts
// have points as soon as they load, and its Workers page lists the two
// running clients; then the dashboard process is killed and started again,
// and after a reload the charts have their points again, read from Redis,
// on the overview and on the topic's page: no traffic since, nothing
// sampled by a page.
func TestBrowserHistoryAfterRestart(t *testing.T) {
	ctx := newBrowser(t)
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	orders, err := topic.New("orders", topic.FixedTime, 4)
	require.NoError(t, err)
	runFleetTraffic(t, rdb, prefix, orders, 40, 3)

	insp := rmq.NewInspector(rdb, rmq.WithPrefix(prefix))
	var running []*rmq.Client
	for _, name := range []string{"emails", "invoices"} {
		tp, err := topic.New(name, topic.Priority, 2)
		require.NoError(t, err)
		c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }),
			consumer.WithConcurrency(3)))
		require.NoError(t, c.Start(context.Background()))
		t.Cleanup(func() { closeClient(t, c) })
		running = append(running, c)
	}
	redistest.Poll(t, func() error {
		ws, err := insp.Workers(context.Background())
		if err == nil && len(ws) != len(running) {
			err = fmt.Errorf("%d workers", len(ws))
		}
		return err
	})

	port, err := procutil.FreePort()
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	base := "http://" + addr + mount + "/"
	p := startDashboardProcess(t, srv.Addr(), prefix, addr)

	chartsHavePoints := func(what string) {
		t.Helper()
		step(t, ctx, chromedp.Poll[chromedp.Void](`(() => {
			const h = document.getElementById("history");
			return h && h.dataset.loaded === "1" && Number(h.dataset.busy) > 0 &&
				h.querySelector('svg[data-field="sent"] [data-name="orders"]') !== null &&
				h.querySelector('svg[data-field="completed"] [data-name="orders"]') !== null;
		})()`, chromedp.WithPollingTimeout(waitLong)))
		legend := text(t, ctx, "#history-legend")
		assert.Contains(t, legend, "orders", what)
	}
	step(t, ctx, chromedp.Navigate(base))
	chartsHavePoints("first load")
	step(t, ctx, chromedp.Click(chromedp.CSS(`#workers-link`)), chromedp.WaitVisible(chromedp.CSS(`#workers`)))
	assert.Equal(t, "2", text(t, ctx, "#c-workers"))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#workers tbody tr")].map(r => r.dataset.worker + " " + r.cells[2].textContent)`))
	require.NoError(t, err)
	ws, err := insp.Workers(context.Background())
	require.NoError(t, err)
	var want []string
	for _, w := range ws {
		want = append(want, w.ID+" "+w.Topics[0])
	}
	assert.ElementsMatch(t, want, rows)

	// The restart: kill -9, and the same address again.
	require.NoError(t, p.Kill())
	startDashboardProcess(t, srv.Addr(), prefix, addr)
	step(t, ctx, chromedp.Navigate(base+"?range=24h"))
	chartsHavePoints("after the restart")
	step(t, ctx, chromedp.Navigate(base+"topic?name=orders"))
	chartsHavePoints("the topic's page")
	sent, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("history").dataset.sent`))
	require.NoError(t, err)
	assert.Equal(t, "43", sent, "sent in the topic's history")

	// More traffic while the page stays open: its charts' newest points
	// follow, without a reload.
	runFleetTraffic(t, rdb, prefix, orders, 5, 0)
	step(t, ctx, chromedp.Poll[chromedp.Void](`document.getElementById("history").dataset.sent === "48"`,
		chromedp.WithPollingTimeout(waitLong)))
}
