package scripts

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// pipelineChunk bounds the calls of one pipeline.
const pipelineChunk = 512

// RunAll runs the calls and returns one command each, in order. A single
// call goes through Script.Run (EVALSHA, falling back to EVAL); several are
// pipelined, at most 512 to a pipeline. A pipelined EVALSHA does not fall
// back to EVAL, so on NOSCRIPT (a restarted or failed-over Redis, or
// another client's SCRIPT FLUSH) the scripts are loaded again and only the
// refused calls are sent again, as EVAL with their source: a call that ran
// is never sent twice, and a flush between the load and the resend cannot
// refuse them again.
func RunAll(ctx context.Context, rdb redis.UniversalClient, calls []Call) []*redis.Cmd {
	if len(calls) == 1 {
		c := calls[0]
		return []*redis.Cmd{c.Script.Run(ctx, rdb, c.Keys, c.Args...)}
	}
	cmds := make([]*redis.Cmd, len(calls))
	send := func(idx []int, withSource bool) {
		for len(idx) > 0 {
			n := min(len(idx), pipelineChunk)
			pipe := rdb.Pipeline()
			for _, j := range idx[:n] {
				c := calls[j]
				if withSource {
					cmds[j] = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
				} else {
					cmds[j] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
				}
			}
			_, _ = pipe.Exec(ctx)
			idx = idx[n:]
		}
	}
	all := make([]int, len(calls))
	for j := range all {
		all[j] = j
	}
	send(all, false)
	var retry []int
	for j, cmd := range cmds {
		if IsNoScript(cmd.Err()) {
			retry = append(retry, j)
		}
	}
	if len(retry) > 0 {
		// The node lost its scripts (a restart, a failover, a flush): load
		// them all again, so the calls that follow need no retry, then
		// send the refused ones with their source, which a flush between
		// the two cannot refuse.
		_ = Load(ctx, rdb)
		send(retry, true)
	}
	return cmds
}
