package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestBrowserEventFeed opens a topic's live event feed in a real browser
// (the page's script on its EventSource, under the page's CSP), cancels a
// message through the Inspector, not the dashboard, and waits for the
// cancelled event to appear in the page; then cancels another by clicking
// its page's Cancel button and confirming, and sees that one in the feed
// too.
func TestBrowserEventFeed(t *testing.T) {
	ctx := newBrowser(t)
	e := newEnv(t)
	// The feed's stream ends when its request does: leave the page before
	// the server closes (the cleanups run in reverse), as a host's
	// Shutdown waits for requests under way.
	t.Cleanup(func() { _, _ = chromedp.Run(ctx, chromedp.Navigate("about:blank")) })
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.setLife(tp, rmq.Lifecycle{Retention: time.Hour, Events: 100})
	e.send(tp, "job-1", "x")
	e.send(tp, "job-2", "y")

	base := e.srv.URL + mount + "/"
	// From the oldest event kept: the cancel below is in the feed whether
	// the stream's read began before it or after.
	step(t, ctx,
		chromedp.Navigate(base+"events?topic=jobs&from=start"),
		chromedp.Poll[chromedp.Void](`document.getElementById("feed").dataset.open === "1"`, chromedp.WithPollingTimeout(waitLong)),
	)
	ok, err := e.insp.Cancel(context.Background(), tp, "job-1")
	require.NoError(t, err)
	require.True(t, ok)
	step(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#feed tr[data-type="cancelled"][data-id="job-1"]`)))
	assert.Equal(t, "live", text(t, ctx, "#feed-state"))
	assert.Equal(t, "job-1", text(t, ctx, `#feed tr[data-type="cancelled"] a.mid`))

	step(t, ctx,
		chromedp.Click(chromedp.CSS(`#feed tr[data-type="cancelled"] a.mid`)),
		chromedp.WaitVisible(chromedp.CSS(`#finished`)),
	)
	assert.Equal(t, "cancelled", text(t, ctx, ".badge.state"))

	step(t, ctx,
		chromedp.Navigate(base+"message?topic=jobs&id=job-2"),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
	)
	assert.Equal(t, "Cancel 1 message of jobs? A waiting one never runs; a running handler sees its context cancelled.", text(t, ctx, "#question"))
	step(t, ctx, chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`#flash`)))
	assert.Equal(t, "Cancelled 1 message.", text(t, ctx, "#flash"))
	assert.Equal(t, "cancelled", text(t, ctx, ".badge.state"))

	step(t, ctx,
		chromedp.Navigate(base+"events?topic=jobs&from=start"),
		chromedp.WaitVisible(chromedp.CSS(`#feed tr[data-type="cancelled"][data-id="job-2"]`)),
	)
}
