package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// The example's scrape shows the counts its traffic must produce, and the
// depth gauges read from Redis.
func TestObservabilityScrape(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, prefix, &out, options{}))
	got := out.String()
	for _, line := range []string{
		`rmq_sent_total{topic="prices",type="rangemerge"} 4`,
		`rmq_merged_total{topic="prices",type="rangemerge"} 2`,
		`rmq_delivered_total{topic="prices",type="rangemerge"} 2`,
		`rmq_acked_total{topic="prices",type="rangemerge"} 2`,
		`rmq_sent_total{topic="orders",type="fixedtime"} 5`,
		`rmq_delivered_total{topic="orders",type="fixedtime"} 6`,
		`rmq_acked_total{topic="orders",type="fixedtime"} 4`,
		`rmq_retried_total{topic="orders",type="fixedtime"} 1`,
		`rmq_dead_total{topic="orders",type="fixedtime"} 1`,
		`rmq_lease_expired_total{topic="orders",type="fixedtime"} 0`,
		`rmq_removed_total{topic="orders",type="fixedtime"} 0`,
		`rmq_firing_lateness_seconds_count{topic="orders",type="fixedtime"} 6`,
		`rmq_handler_duration_seconds_count{topic="prices",type="rangemerge"} 2`,
		`rmq_store_depth{topic="jobs",type="priority"} 3`,
		`rmq_dead_depth{topic="orders",type="fixedtime"} 1`,
		`rmq_prepare_depth{topic="prices",type="rangemerge"} 0`,
		`rmq_depth_errors_total 0`,
	} {
		assert.Contains(t, got, line+"\n")
	}
	assert.NotContains(t, got, "_bucket{")
	assert.Contains(t, got, "histogram bucket lines left out")
	assert.NotContains(t, got, `rmq_firing_lateness_seconds_count{topic="jobs"`, "priority messages have no due time")
}
