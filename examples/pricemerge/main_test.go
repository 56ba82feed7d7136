package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// Fifteen changes of three SKUs merge into three deliveries, each carrying
// its SKU's fifth (last) price.
func TestPriceMerge(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, redistest.Prefix(t), &out))
	got := out.String()
	for _, line := range []string{
		"sku-keyboard -> price 15.99 (change #5;",
		"sku-mouse    -> price 25.99 (change #5;",
		"sku-monitor  -> price 35.99 (change #5;",
		"result: 15 changes sent -> 3 deliveries, each with its SKU's latest price\n",
	} {
		assert.Contains(t, got, line)
	}
	assert.Equal(t, 3, strings.Count(got, "-> price"), got)
}
