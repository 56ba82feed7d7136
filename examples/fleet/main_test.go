package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// Every order's six events are handled once, in order, while worker-2
// leaves half-way and its slots move to the other two.
func TestFleet(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	// The example's own tick (200 ms), so that sessions are short.
	zk := zktest.StartConfig(t, zkserver.Config{TickTime: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	prefix := redistest.Prefix(t)
	require.NoError(t, run(ctx, rdb, zk.Addr(), prefix, &out))
	got := out.String()
	// What main does after the run: the run's keys go.
	require.NotEmpty(t, redistest.KeysWithPrefix(t, rdb, prefix+":"))
	require.NoError(t, deleteKeys(ctx, rdb, prefix))
	assert.Empty(t, redistest.KeysWithPrefix(t, rdb, prefix+":"))

	assert.Contains(t, got, "worker-2 leaves")
	assert.Contains(t, got, "all 72 events of 12 orders handled once each, in order, one at a time per order\n")
	histories := regexp.MustCompile(`(?m)^order-\d\d: created@\d → paid@\d → picked@\d → packed@\d → shipped@\d → delivered@\d$`).FindAllString(got, -1)
	assert.Len(t, histories, 12, got)
	after := regexp.MustCompile(`slots per worker: worker-1 (\d+), worker-3 (\d+)\n`).FindStringSubmatch(got)
	require.NotNil(t, after, got)
	one, _ := strconv.Atoi(after[1])
	three, _ := strconv.Atoi(after[2])
	assert.Equal(t, 16, one+three, "the two workers left own every slot")
}
