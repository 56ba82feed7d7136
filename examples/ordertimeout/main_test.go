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

// The unpaid order is cancelled by its timeout; the paid ones lose their
// timeouts to Remove and are never cancelled.
func TestOrderTimeout(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, redistest.Prefix(t), &out))
	got := out.String()
	for _, line := range []string{
		"order-1001 created, awaiting payment",
		"order-1001 PAID -> its timeout message is removed",
		"order-1003 PAID -> its timeout message is removed",
		"order-1002 unpaid at its timeout -> CANCELLED",
		"result: timeouts fired for [order-1002]; paid orders [order-1001 order-1003]\n",
	} {
		assert.Contains(t, got, line)
	}
	assert.NotContains(t, got, "order-1001 unpaid")
	assert.NotContains(t, got, "order-1003 unpaid")
}
