package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// On a Redis Cluster, whose topic slots lie on different nodes: cancel,
// show, events (the log so far, ended at each slot's end) and wait.
func TestRmqctlLifeCluster(t *testing.T) {
	bin := buildBinary(t)
	cl := redistest.SharedCluster(t)
	cc := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp := topic.MustNew("clife", topic.FixedTime, 8)
	c, err := rmq.New(cc, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	defer c.Close(ctx)
	var ids []string
	for j := range 8 {
		id := fmt.Sprintf("x%d", j)
		ids = append(ids, id)
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte(id), time.Now().Add(time.Hour), producer.WithKey(id))
		require.NoError(t, err)
	}
	r := ctl{t: t, bin: bin, global: []string{"--cluster", strings.Join(cl.Addrs(), ","), "--prefix", prefix}}
	r.ok("lifecycle", "clife", "--retention", "10m", "--events", "100")
	for _, id := range ids[:6] {
		r.ok("cancel", "clife", id)
	}
	out := lines(r.ok("events", "clife"))
	require.Len(t, out, 6, "%q", out)
	var got []string
	for _, l := range out {
		m := eventLine.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		got = append(got, m[3])
	}
	assert.ElementsMatch(t, ids[:6], got)
	assert.Regexp(t, `(?m)^state:\s+cancelled$`, r.ok("show", "clife", "x0"))
	res := r.run("", "wait", "clife", "x1")
	assert.Equal(t, exitCancelled, res.code, res.stderr)
	res = r.run("", "wait", "clife", "x7", "--timeout", "100ms") // the bound is what is tested
	assert.Equal(t, exitTimedOut, res.code, res.stderr)
}
