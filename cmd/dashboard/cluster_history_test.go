package dashboard_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestHistoryWorkersAndSettingsOnACluster: on a Redis Cluster, the history
// of a closed client, the Workers page of a running one, and the settings
// form all work (their keys live on several masters).
func TestHistoryWorkersAndSettingsOnACluster(t *testing.T) {
	e := newEnvOn(t, redistest.ClusterClient(t, redistest.SharedCluster(t)))
	orders := e.topic("orders", topic.FixedTime, 8)
	runFleetTraffic(t, e.rdb, e.prefix, orders, 20, 2)
	h := e.history("range=24h")
	assert.Equal(t, histPoint{Sent: 22, Completed: 20, Dead: 2}, withoutTimes(sum(h.Total)))

	jobs := e.topic("jobs", topic.Priority, 4)
	e.client(jobs, func(context.Context, *consumer.Message) error { return nil })
	e.waitFor("1 worker", func() bool {
		ws, err := e.insp.Workers(context.Background())
		return err == nil && len(ws) == 1
	})
	assert.Contains(t, e.get("workers"), `<a class="topic" href="topic?name=jobs">jobs</a>`)

	assert.Equal(t, "Stored limits conc=2; retention 1h0m0s, event log 0.",
		e.act(url.Values{"op": {"settings"}, "topic": {"jobs"}, "conc": {"2"}, "retention": {"1h"}}))
	assert.Equal(t, rmq.Limits{Concurrency: 2}, e.limits(jobs))
	assert.Equal(t, rmq.Lifecycle{Retention: time.Hour}, e.life(jobs))
}

func withoutTimes(p histPoint) histPoint {
	p.HandlerP99Ms = 0
	return p
}
