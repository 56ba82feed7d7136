package dashboard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/topic"
)

// WithForwards: the overview lists the host's forwards with their counts
// and last error (as text: a broker's error is never markup), the page of
// a forwarded topic says where it goes, and nothing changes without it.
func TestForwardsPanel(t *testing.T) {
	var calls atomic.Int64
	failedAt := time.Now().Add(-3 * time.Second)
	e := newEnv(t, dashboard.WithForwards(func(context.Context) []dashboard.Forward {
		calls.Add(1)
		return []dashboard.Forward{
			{Topic: "shop.orders", Target: "nats://127.0.0.1:4222/orders", Forwarded: 12},
			{Topic: "shop.refunds", Target: "amqp://guest:***@127.0.0.1:5672/?exchange=x", Forwarded: 3, Failed: 2,
				LastError: `rmqamqp: <script>alert(1)</script> 312 NO_ROUTE`, LastErrorAt: failedAt},
		}
	}))
	orders := e.topic("shop.orders", topic.FixedTime, 1)
	e.send(orders, "a", "x")
	plain := e.topic("plain", topic.FixedTime, 1)
	e.send(plain, "b", "x")

	page := e.get("")
	require.Contains(t, page, `<table class="grid" id="forwards">`)
	row := func(name string) string {
		i := strings.Index(page, `<tr data-forward="`+name+`">`)
		require.GreaterOrEqual(t, i, 0, name)
		return page[i : i+strings.Index(page[i:], "</tr>")]
	}
	o := row("shop.orders")
	require.Contains(t, o, `href="topic?name=shop.orders"`)
	require.Contains(t, o, "<td>nats://127.0.0.1:4222/orders</td>")
	require.Contains(t, o, `<td class="n">12</td>`)
	require.Contains(t, o, `<td class="n">0</td>`)
	r := row("shop.refunds")
	require.Contains(t, r, `<td class="n bad">2</td>`)
	require.Contains(t, r, `&lt;script&gt;alert(1)&lt;/script&gt; 312 NO_ROUTE`)
	require.Contains(t, r, "s ago")
	require.NotContains(t, page, "<script>alert(1)")
	require.NotContains(t, page, `data-forward="plain"`)

	tp := e.get("topic?name=shop.orders")
	require.Contains(t, tp, `<p class="note" id="forward">Forwarded to <b>nats://127.0.0.1:4222/orders</b> when due: 12 forwarded, <span>0 failed</span>.</p>`)
	require.NotContains(t, e.get("topic?name=plain"), `id="forward"`)
	require.EqualValues(t, 3, calls.Load(), "one call per page view")

	// Read-only: no form in the panel, so nothing to forge.
	i := strings.Index(page, `id="forwards"`)
	panel := page[i : i+strings.Index(page[i:], "</section>")]
	require.NotContains(t, panel, "<form")

	bare := newEnv(t)
	require.NotContains(t, bare.get(""), `id="forwards"`)
}
