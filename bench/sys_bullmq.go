package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// bullSys runs the cases with BullMQ on Node: each case is one node process
// (bench/bullmq/driver.mjs) with one Queue (one ioredis connection) and, to
// consume, one Worker of concurrency workers, against the bench's
// redis-server (whose maxmemory-policy is noeviction, as BullMQ wants). Jobs
// are added with BullMQ's default options. The meter takes the node
// process as the client: its CPU, bytes and write calls from /proc.
type bullSys struct {
	dir         string
	host        string
	port        int
	admin       *redis.Client
	s           settings
	version     string // BullMQ's
	nodeVersion string
	verbose     bool
}

// newBullSys installs what BullMQ needs when it is missing (node and npm
// with apt-get only when apt is set) and readies Redis for it.
func newBullSys(ctx context.Context, addr string, admin *redis.Client, s settings, verbose, apt bool) (*bullSys, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	// BullMQ refuses to run (or warns) on a Redis that may evict its keys.
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		return nil, err
	}
	b := &bullSys{dir: bullmqDir(), host: host, port: p, admin: admin, s: s, verbose: verbose}
	b.version, b.nodeVersion, err = ensureBullMQ(ctx, b.dir, apt)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bullSys) name() string    { return "BullMQ " + b.version }
func (b *bullSys) id() string      { return "bullmq" }
func (b *bullSys) timeBased() bool { return true }

func (b *bullSys) req(c, q string) bullReq {
	return bullReq{Case: c, Host: b.host, Port: b.port, Queue: q, Body: b.s.body}
}

// counted runs a case whose driver reports how many jobs it handled, which
// must be n.
func (b *bullSys) counted(ctx context.Context, m *meter, r bullReq) error {
	out, err := runDriver(ctx, b.dir, r, m, b.verbose)
	if err == nil && out.Count != r.N {
		err = fmt.Errorf("bullmq %s: driver counted %d of %d", r.Case, out.Count, r.N)
	}
	return err
}

// produce: Queue.add of one job, from g concurrent loops.
func (b *bullSys) produce(ctx context.Context, m *meter, q string, n, g int) error {
	r := b.req("produce", q)
	r.N, r.G = n, g
	return b.counted(ctx, m, r)
}

// produceBatch: Queue.addBulk of batch jobs, from g concurrent loops.
func (b *bullSys) produceBatch(ctx context.Context, m *meter, q string, n, g, batch int) error {
	r := b.req("batch", q)
	r.N, r.G, r.Batch = n, g, batch
	return b.counted(ctx, m, r)
}

// consume: a backlog loaded with addBulk, drained by a Worker; timed from
// the worker's start to the nth "completed" event. BullMQ has no prefetch
// setting (each of its concurrency slots fetches one job).
func (b *bullSys) consume(ctx context.Context, m *meter, q string, n, prefetch int) error {
	if prefetch > 0 {
		return errUnsupported
	}
	r := b.req("consume", q)
	r.N, r.Workers = n, b.s.workers
	return b.counted(ctx, m, r)
}

// lateness: Queue.add with a delay to the due instant, a Worker running
// meanwhile; the driver paces the adds as runLateness does and returns
// every firing's lateness.
func (b *bullSys) lateness(ctx context.Context, q string, lc latCase) (latResult, error) {
	r := b.req("lateness", q)
	r.Tag, r.Rate, r.Workers, r.Producers = lc.tag, lc.rate, b.s.workers, b.s.producers
	r.DurationMs, r.LeadMs = lc.duration.Milliseconds(), lc.lead.Milliseconds()
	out, err := runDriver(ctx, b.dir, r, nil, b.verbose)
	if err != nil {
		return latResult{}, err
	}
	lat := make([]time.Duration, len(out.Lat))
	for i, ms := range out.Lat {
		lat[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return summarise(out.Sent, lat, out.Extra, time.Duration(out.SendLagMs*float64(time.Millisecond))), nil
}

// loadFarFuture: addBulk of 1,000 jobs delayed by a year, from 4 loops.
func (b *bullSys) loadFarFuture(ctx context.Context, q, tag string, n int) error {
	r := b.req("far", q)
	r.N, r.Tag = n, tag
	return b.counted(ctx, nil, r)
}
