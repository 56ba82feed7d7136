package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// demoLife gives the screenshots' demo its settings and finished
// messages: limits on orders, retention and an event log on invoices,
// six invoices rendered now by the live client (TestScreenshots: they
// complete with a result) and two waiting ones cancelled.
func demoLife(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	orders := e.topic("orders.timeout", topic.FixedTime, 8)
	require.NoError(t, e.insp.SetLimits(ctx, orders, rmq.Limits{Rate: 200, RatePer: time.Second, Concurrency: 16}))
	invoices := e.topic("invoices.render", topic.FixedTime, 4)
	require.NoError(t, e.insp.SetLifecycle(ctx, invoices, rmq.Lifecycle{Retention: 72 * time.Hour, Events: 1000}))
	var batch []producer.BatchMessage
	var ids []string
	for j := range 6 {
		id := fmt.Sprintf("inv-2026-%04d", 120+j)
		ids = append(ids, id)
		batch = append(batch, producer.BatchMessage{Key: id, At: time.Now(), Body: []byte(`{"invoice":"` + id + `","lines":2}`)})
	}
	_, err := e.prod.SendBatch(ctx, invoices, batch)
	require.NoError(t, err)
	e.waitFor("6 invoices rendered", func() bool {
		for _, id := range ids {
			m, err := e.insp.Message(ctx, invoices, id)
			if err != nil || m.State != rmq.StateCompleted {
				return false
			}
		}
		return true
	})
	for _, id := range []string{"inv-2026-0200", "inv-2026-0201"} {
		ok, err := e.insp.Cancel(ctx, invoices, id)
		require.NoError(t, err)
		require.True(t, ok, id)
	}
}
