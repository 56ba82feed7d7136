package inspect

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// SetLimits stores and removes a topic's limits, refuses bad ones with the
// caller's sentinel, and Flow reads them with the live adaptive reports.
func TestLimitsAndFlow(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	in := New(rdb, prefix, nil)
	tp := topic.MustNew("orders", topic.FixedTime, 4)

	errBad := errors.New("bad limits")
	require.ErrorIs(t, in.SetLimits(ctx, tp, options.Limits{Rate: -1}, errBad), errBad)
	l, err := in.Limits(ctx, tp)
	require.NoError(t, err)
	assert.True(t, l.IsZero(), "a refused call stores nothing: %v", l)

	want := options.Limits{Rate: 50, RatePer: time.Second, Concurrency: 5}
	require.NoError(t, in.SetLimits(ctx, tp, want, errBad))
	l, err = in.Limits(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, want, l)

	now := time.Now()
	live := strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10)
	gone := strconv.FormatInt(now.Add(-time.Millisecond).UnixMilli(), 10)
	require.NoError(t, rdb.HSet(ctx, keyspace.AdaptiveKey(prefix, tp),
		"b", "3 1 8 "+live, "a", "2 1 4 "+live, "c", "1 1 2 "+gone, "d", "malformed").Err())
	l, adaptive, err := in.Flow(ctx, tp, now)
	require.NoError(t, err)
	assert.Equal(t, want, l)
	assert.Equal(t, []AdaptiveLimit{{Client: "a", Limit: 2, Min: 1, Max: 4}, {Client: "b", Limit: 3, Min: 1, Max: 8}}, adaptive,
		"live reports only, by client")

	require.NoError(t, in.SetLimits(ctx, tp, options.Limits{}, errBad))
	l, err = in.Limits(ctx, tp)
	require.NoError(t, err)
	assert.True(t, l.IsZero(), "zero limits remove the stored ones: %v", l)
}
