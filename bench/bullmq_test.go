package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// The BullMQ system runs each case of the bench in a node process: tiny
// versions of every case reach Redis with exactly the jobs asked for, and
// the meter reads the node process's costs. Without node (CI installs Go and
// Debian packages only) the test skips; with node it runs npm ci when
// bench/bullmq/node_modules lacks the pinned BullMQ.
func TestBullMQDriverRunsTinyCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := redistest.Start(t, redisserver.Config{})
	admin := redistest.Client(t, srv)
	b, err := newBullSys(ctx, srv.Addr(), admin, settings{body: 128, producers: 4, workers: 8}, testing.Verbose(), false)
	switch {
	case errors.Is(err, errNoNode):
		t.Skip("node or npm not installed: BullMQ cannot run")
	case errors.Is(err, errNpmCI):
		t.Skipf("BullMQ not installed and npm ci failed (offline?): %v", err)
	case err != nil:
		t.Fatal(err)
	}
	metered := func(name string, n int, run func(m *meter) error) costs {
		t.Helper()
		m := &meter{ctx: ctx, admin: admin, c: &counters{}}
		if err := run(m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.pid == 0 {
			t.Fatalf("%s: the meter was not given the node process", name)
		}
		c := m.costs(n)
		// Each job carries a 128-byte body to Redis: the node process wrote it.
		if c.rate <= 0 || c.redisCmds < 1 || c.scriptCalls < 1 || c.wireBytes < 128 {
			t.Errorf("%s: costs %+v: want a rate, a script call and a body's bytes per job", name, c)
		}
		return c
	}
	count := func(cmd interface{ Val() int64 }, want int64, what string) {
		t.Helper()
		if got := cmd.Val(); got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}

	metered("produce", 50, func(m *meter) error { return b.produce(ctx, m, "p", 50, 4) })
	count(admin.LLen(ctx, "bull:p:wait"), 50, "waiting jobs after 50 adds")

	metered("batch", 100, func(m *meter) error { return b.produceBatch(ctx, m, "b", 100, 2, 30) })
	count(admin.LLen(ctx, "bull:b:wait"), 100, "waiting jobs after addBulk of 100 in 30s")

	metered("consume", 60, func(m *meter) error { return b.consume(ctx, m, "c", 60, 0) })
	count(admin.LLen(ctx, "bull:c:wait"), 0, "waiting jobs after the drain")
	count(admin.LLen(ctx, "bull:c:active"), 0, "active jobs after the drain")
	count(admin.ZCard(ctx, "bull:c:completed"), 60, "completed jobs (kept: BullMQ's default)")
	if err := b.consume(ctx, &meter{ctx: ctx, admin: admin, c: &counters{}}, "c2", 10, 64); !errors.Is(err, errUnsupported) {
		t.Errorf("consume with a prefetch: %v, want errUnsupported", err)
	}

	lr, err := b.lateness(ctx, "l", latCase{rate: 200, duration: 100 * time.Millisecond, lead: 300 * time.Millisecond, tag: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if lr.sent != 20 || lr.fired != 20 || lr.extra != 0 || lr.early != 0 || lr.p50 < 0 || lr.max < lr.p99 {
		t.Errorf("lateness: %+v: want 20 sent, 20 fired once each, none early", lr)
	}

	if err := b.loadFarFuture(ctx, "f", "w", 30); err != nil {
		t.Fatal(err)
	}
	count(admin.ZCard(ctx, "bull:f:delayed"), 30, "delayed jobs after loading 30 far-future ones")
}
