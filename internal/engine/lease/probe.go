package lease

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
)

// This file is the shared sweeper's reading of Redis (hub.go says
// when it runs): probes, which ask only whether prepare sets exist, and
// head reads, which learn each slot's earliest lease. Nothing here writes;
// the sweep itself is sweep.lua (sweep.go).

const (
	// probeChunk bounds the keys of one EXISTS: a 8,192-key EXISTS costs
	// Redis well under a millisecond.
	probeChunk = 8192
	// readTimeout bounds one round of probes and reads.
	readTimeout = 5 * time.Second
)

// head is the earliest lease of one slot's prepare set.
type head struct {
	slot     int
	deadline int64 // Unix seconds; the lease runs out once Redis's clock passes it
	empty    bool
}

// check runs one round of the sweeper: reads are engines whose heads are
// read at once, probes and net (the safety net's idle engines) are probed
// first on a single node, and read only if a prepare set exists. Each
// engine read is swept where a lease ran out and scheduled again.
func (l *Hub) check(ctx context.Context, reads, probes, net []*state) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	rdb := firstRedis(reads, probes, net)
	if _, single := rdb.(*redis.Client); single {
		// A batch of probes is asked at once first: mostly the answer is
		// no, one command for many topics.
		var each []*state
		if len(probes) == 1 {
			each = probes
		} else if len(probes) > 1 {
			if found, err := probeAny(ctx, rdb, probes); err != nil || found {
				each = probes
			}
		}
		if len(net) > 0 {
			found, err := probeAny(ctx, rdb, net)
			if err != nil {
				logWarn(ctx, net, "rmq: lease probe failed", err) // the next round asks again
			} else if found {
				each = append(each, net...)
			}
		}
		var err error
		if probes, err = probeEach(ctx, rdb, each); err != nil {
			logWarn(ctx, probes, "rmq: lease probe failed", err)
		}
	} else {
		probes = append(probes, net...)
	}
	reads = append(reads, probes...)
	if len(reads) == 0 {
		return
	}
	heads, offset, errs := readHeads(ctx, rdb, reads)
	failed := 0
	for i, st := range reads {
		if errs[i] != nil {
			// Look again a sweep interval later, as the old sweeper did.
			if failed++; failed == 1 && l.ctxErr() == nil {
				st.p.Log.WarnContext(ctx, "rmq: reading leases failed", "err", errs[i])
			}
			l.finishCheck(st, time.Now().Add(st.p.SweepInterval))
			continue
		}
		l.finishCheck(st, sweepHeads(ctx, l, st, heads[i], offset))
	}
}

// ctxErr is the hub's context's error.
func (l *Hub) ctxErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		return nil
	}
	return l.ctx.Err()
}

func firstRedis(lists ...[]*state) redis.UniversalClient {
	for _, l := range lists {
		if len(l) > 0 {
			return l[0].p.RDB
		}
	}
	return nil
}

func logWarn(ctx context.Context, sts []*state, msg string, err error) {
	if len(sts) > 0 && ctx.Err() == nil {
		sts[0].p.Log.WarnContext(ctx, msg, "err", err, "topics", len(sts))
	}
}

// prepareKeys returns the slots st's engine sweeps (its active slots) and
// their prepare keys, as strings and as command arguments. Those of an
// engine that consumes every slot never change: they are made once.
func (st *state) prepareKeys() ([]int, []string, []any) {
	if st.fixed {
		return st.slots, st.keys, st.args
	}
	slots, all := st.c.ActiveSlots()
	keys := make([]string, len(slots))
	args := make([]any, len(slots))
	for i, s := range slots {
		keys[i] = st.c.PrepareKey(s)
		args[i] = keys[i]
	}
	if all {
		st.slots, st.keys, st.args, st.fixed = slots, keys, args, true
	}
	return slots, keys, args
}

// probeAny reports whether any prepare set of sts exists: one EXISTS per
// probeChunk keys, pipelined (single node: the keys of many hash slots in
// one command).
func probeAny(ctx context.Context, rdb redis.UniversalClient, sts []*state) (bool, error) {
	pipe := rdb.Pipeline()
	var cmds []*redis.Cmd
	total := 0
	for _, st := range sts {
		_, keys, _ := st.prepareKeys()
		total += len(keys)
	}
	chunk := make([]any, 0, min(total, probeChunk)+1)
	chunk = append(chunk, "exists")
	for _, st := range sts {
		_, _, args := st.prepareKeys()
		for len(args) > 0 {
			n := min(len(args), probeChunk+1-len(chunk))
			chunk = append(chunk, args[:n]...)
			args = args[n:]
			if len(chunk) == probeChunk+1 {
				cmds = append(cmds, pipe.Do(ctx, chunk...))
				chunk = append(make([]any, 0, probeChunk+1), "exists")
			}
		}
	}
	if len(chunk) > 1 {
		cmds = append(cmds, pipe.Do(ctx, chunk...))
	}
	if len(cmds) == 0 {
		return false, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, err
	}
	for _, cmd := range cmds {
		if n, _ := cmd.Int64(); n > 0 {
			return true, nil
		}
	}
	return false, nil
}

// probeEach returns the engines of sts with a prepare set that exists: one
// EXISTS per engine, pipelined. On an error it returns them all (they are
// read, and the read's error schedules them again).
func probeEach(ctx context.Context, rdb redis.UniversalClient, sts []*state) ([]*state, error) {
	if len(sts) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(sts))
	for i, st := range sts {
		if _, keys, _ := st.prepareKeys(); len(keys) > 0 {
			cmds[i] = pipe.Exists(ctx, keys...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return sts, err
	}
	var out []*state
	for i, cmd := range cmds {
		if cmd != nil && cmd.Val() > 0 {
			out = append(out, sts[i])
		}
	}
	return out, nil
}

// readHeads reads the earliest lease of every active slot of each engine
// (ZRANGE prepare 0 0 WITHSCORES), pipelined, with Redis's clock (TIME):
// offset is Redis's clock minus the local one, a lower bound (taken when
// the reply arrived), nil when TIME failed. It is the sweeper's own
// estimate: the engines' clocks steer their fetchers and are left to the
// fetch replies.
func readHeads(ctx context.Context, rdb redis.UniversalClient, sts []*state) ([][]head, *time.Duration, []error) {
	heads := make([][]head, len(sts))
	errs := make([]error, len(sts))
	pipe := rdb.Pipeline()
	timeCmd := pipe.Time(ctx)
	cmds := make([][]*redis.ZSliceCmd, len(sts))
	for i, st := range sts {
		slots, keys, _ := st.prepareKeys()
		heads[i] = make([]head, len(slots))
		cmds[i] = make([]*redis.ZSliceCmd, len(slots))
		for j, k := range keys {
			heads[i][j].slot = slots[j]
			cmds[i][j] = pipe.ZRangeWithScores(ctx, k, 0, 0)
		}
	}
	_, _ = pipe.Exec(ctx)
	received := time.Now()
	var offset *time.Duration
	if t, err := timeCmd.Result(); err == nil {
		d := t.Sub(received)
		offset = &d
	}
	for i := range sts {
		for j, cmd := range cmds[i] {
			zs, err := cmd.Result()
			if err != nil {
				errs[i] = err
				break
			}
			if len(zs) == 0 {
				heads[i][j].empty = true
				continue
			}
			heads[i][j].deadline, _ = scripts.SplitPrepareScore(zs[0].Score)
		}
	}
	return heads, offset, errs
}

// readEngineHeads reads the heads of some slots of one engine.
func readEngineHeads(ctx context.Context, st *state, slotList []int) ([]head, error) {
	pipe := st.p.RDB.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(slotList))
	for i, s := range slotList {
		cmds[i] = pipe.ZRangeWithScores(ctx, st.c.PrepareKey(s), 0, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	out := make([]head, len(slotList))
	for i, cmd := range cmds {
		out[i].slot = slotList[i]
		if zs := cmd.Val(); len(zs) > 0 {
			out[i].deadline, _ = scripts.SplitPrepareScore(zs[0].Score)
		} else {
			out[i].empty = true
		}
	}
	return out, nil
}
