package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// rmqctl limits shows, sets and clears a topic's flow limits, refuses bad
// ones (exit 2, nothing stored), and stats shows the limits, the grouped
// messages and a consuming client's adaptive limit.
func TestRmqctlLimits(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp := topic.MustNew("tenants", topic.FixedTime, 2)
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	for i, g := range []string{"a", "a", "b"} {
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte{byte('x' + i)}, time.Now().Add(time.Hour), producer.WithGroup(g))
		require.NoError(t, err)
	}
	r := ctl{t: t, bin: bin, global: []string{"--redis", srv.Addr(), "--prefix", prefix}}

	assert.Equal(t, "tenants: none\n", r.ok("limits", "tenants"))
	assert.Equal(t, "tenants: rate=50/1s gconc=1\n", r.ok("limits", "tenants", "set", "rate=50/1s gconc=1"))
	bad := r.run("", "limits", "tenants", "set", "rate=0/1s")
	assert.Equal(t, 2, bad.code, bad.stderr)
	assert.Contains(t, bad.stderr, "invalid limits")
	bad = r.run("", "limits", "tenants", "sets", "x")
	assert.Equal(t, 2, bad.code)
	l, err := c.Inspector().Limits(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, rmq.Limits{Rate: 50, RatePer: time.Second, GroupConcurrency: 1}, l)

	// A consumer with an adaptive limit reports it.
	require.NoError(t, c.Register(topic.MustNew("busy", topic.FixedTime, 1), consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }),
		consumer.WithAdaptiveConcurrency(2, 9)))
	require.NoError(t, c.Start(ctx))
	defer func() { _ = c.Close(context.Background()) }()
	out := r.ok("stats", "tenants")
	assert.Contains(t, out, "limits:        rate=50/1s gconc=1")
	assert.Contains(t, out, "in groups:     3 waiting in 2 groups")
	var st statsJSON
	r.json(&st, "stats", "tenants")
	assert.Equal(t, "rate=50/1s gconc=1", st.Limits)
	assert.EqualValues(t, 3, st.Grouped)
	assert.EqualValues(t, 2, st.Groups)
	require.Eventually(t, func() bool {
		return strings.Contains(r.ok("stats", "busy"), "adaptive:") && strings.Contains(r.ok("stats", "busy"), " 2 (2..9)")
	}, 10*time.Second, 50*time.Millisecond)

	assert.Equal(t, "tenants: none\n", r.ok("limits", "tenants", "clear"))
}
