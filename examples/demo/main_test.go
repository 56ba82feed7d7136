package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
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
	err := run(ctx, servers{}, byDefault, &out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	got := out.String()
	for _, line := range []string{
		"-- started a throwaway redis-server on 127.0.0.1:",
		"== ordertimeout (REDIS_URL=redis://127.0.0.1:",
		"result: timeouts fired for [order-1002]; paid orders [order-1001 order-1003]\n",
		"== pricemerge (REDIS_URL=redis://127.0.0.1:",
		"result: 15 changes sent -> 3 deliveries, each with its SKU's latest price\n",
		"== priorityjobs (REDIS_URL=redis://127.0.0.1:",
		`dead: charge-card-order-1002 after 3 attempts, last error "payment gateway unavailable"`,
		"-- demo: OK (3 examples in ",
		"-- stopped the throwaway redis-server\n",
	} {
		assert.Contains(t, got, line)
	}
	assert.Less(t, strings.Index(got, "== ordertimeout"), strings.Index(got, "== pricemerge"))
	assert.Less(t, strings.Index(got, "== pricemerge"), strings.Index(got, "== priorityjobs"))
	assert.NotContains(t, got, "ZooKeeper", "no example of the default set needs one")
}

// `demo fleet`: a throwaway ZooKeeper next to the redis-server, both
// stopped at the end, and the fleet example run against them.
func TestDemoFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program and starts ZooKeeper")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names, err := pick([]string{"fleet"})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	err = run(ctx, servers{}, names, &out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	got := out.String()
	for _, line := range []string{
		"-- started a throwaway ZooKeeper on 127.0.0.1:",
		"== fleet (REDIS_URL=redis://127.0.0.1:",
		" ZK_ADDR=127.0.0.1:",
		"all 72 events of 12 orders handled once each, in order, one at a time per order\n",
		"-- demo: OK (1 examples in ",
		"-- stopped the throwaway ZooKeeper\n",
	} {
		assert.Contains(t, got, line)
	}
}

// Named examples run in the demo's order; an unknown name is refused.
func TestPick(t *testing.T) {
	names, err := pick(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"ordertimeout", "pricemerge", "priorityjobs"}, names)
	names, err = pick([]string{"fleet", "priorityjobs"})
	require.NoError(t, err)
	assert.Equal(t, []string{"priorityjobs", "fleet"}, names)
	_, err = pick([]string{"pricemerge", "nope"})
	assert.ErrorContains(t, err, `unknown example "nope"`)
}

// The demo prints the Redis it uses, never its password.
func TestRedact(t *testing.T) {
	assert.Equal(t, "redis://:xxxxx@10.0.0.1:6380/1", redact("redis://:s3cret@10.0.0.1:6380/1"))
	assert.Equal(t, "redis://10.0.0.1:6380", redact("redis://10.0.0.1:6380"))
	assert.Equal(t, "10.0.0.1:6380", redact("10.0.0.1:6380"))
}
