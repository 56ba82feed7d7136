package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain checks that no goroutine outlives the tests (the demo starts
// its redis-server through procutil's spawner, which lives on by design).
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// The demo as scripts/demo.sh runs it: its own throwaway redis-server, the
// three examples built and run against it, each reporting its result.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three programs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, "", &out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	got := out.String()
	for _, line := range []string{
		"-- started a throwaway redis-server on 127.0.0.1:",
		"== ordertimeout (REDIS_ADDR=127.0.0.1:",
		"result: timeouts fired for [order-1002]; paid orders [order-1001 order-1003]\n",
		"== pricemerge (REDIS_ADDR=127.0.0.1:",
		"result: 15 changes sent -> 3 deliveries, each with its SKU's latest price\n",
		"== priorityjobs (REDIS_ADDR=127.0.0.1:",
		`dead: charge-card-order-1002 after 3 attempts, last error "payment gateway unavailable"`,
		"-- demo: OK (3 examples in ",
		"-- stopped the throwaway redis-server\n",
	} {
		assert.Contains(t, got, line)
	}
	assert.Less(t, strings.Index(got, "== ordertimeout"), strings.Index(got, "== pricemerge"))
	assert.Less(t, strings.Index(got, "== pricemerge"), strings.Index(got, "== priorityjobs"))
}
