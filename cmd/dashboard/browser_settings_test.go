package dashboard_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestBrowserSettings changes a topic's limits and retention through its
// settings page in a real browser, from the topic page's link; then a page
// of another site (served on localhost, the dashboard on 127.0.0.1) posts
// a settings form to the dashboard by itself, and the dashboard refuses it
// and stores nothing.
func TestBrowserSettings(t *testing.T) {
	ctx := newBrowser(t)
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "j1", "x")
	base := e.srv.URL + mount + "/"
	step(t, ctx,
		chromedp.Navigate(base+"topic?name=jobs"),
		chromedp.Click(chromedp.CSS(`#settings-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#settings-form`)),
		chromedp.SendKeys(chromedp.CSS(`#conc`), "3"),
		chromedp.SendKeys(chromedp.CSS(`#rate`), "20"),
		chromedp.SendKeys(chromedp.CSS(`#rate_per`), "1m"),
		chromedp.SendKeys(chromedp.CSS(`#retention`), "24h"),
		chromedp.SendKeys(chromedp.CSS(`#events`), "500"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	assert.Equal(t, "Stored limits rate=20/1m0s conc=3; retention 24h0m0s, event log 500.", text(t, ctx, "#flash"))
	assert.Equal(t, "rate=20/1m0s conc=3", text(t, ctx, "#limits"))
	assert.Equal(t, rmq.Limits{Rate: 20, RatePer: time.Minute, Concurrency: 3}, e.limits(tp))
	assert.Equal(t, rmq.Lifecycle{Retention: 24 * time.Hour, Events: 500}, e.life(tp))

	// The other site's page: a form aimed at the dashboard, submitted by
	// its script as the page loads. The browser has the dashboard's CSRF
	// cookie by now; a token it cannot know is all the page can send.
	evilPage := fmt.Sprintf(`<!doctype html><form id="f" method="post" action="%saction">
<input name="op" value="settings"><input name="topic" value="jobs"><input name="conc" value="1">
<input name="csrf" value="guessed"><input name="confirm" value="yes"></form>
<script>document.getElementById("f").submit()</script>`, base)
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(evilPage))
	}))
	// localhost is another site than 127.0.0.1 to the browser.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	evil.Listener = ln
	evil.Start()
	t.Cleanup(evil.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	step(t, ctx,
		chromedp.Navigate("http://localhost:"+port+"/"),
		chromedp.Poll[chromedp.Void](`location.href.endsWith("/action")`, chromedp.WithPollingTimeout(waitLong)),
		chromedp.WaitReady(chromedp.CSS(`main`)),
	)
	body := text(t, ctx, "main")
	assert.True(t, strings.Contains(body, "cross-origin request refused"), "the dashboard's answer: %s", body)
	assert.Equal(t, rmq.Limits{Rate: 20, RatePer: time.Minute, Concurrency: 3}, e.limits(tp), "nothing stored")
}
