package redistest

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"
)

// Observer is a go-redis hook that shows tests every command a client
// sends, alone or in a pipeline: Before as it leaves, After once its reply
// (or error) is in. Either may be nil.
type Observer struct {
	Before, After func(redis.Cmder)
}

// DialHook passes dialing through.
func (o Observer) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook observes one command.
func (o Observer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		o.each(o.Before, cmd)
		err := next(ctx, cmd)
		o.each(o.After, cmd)
		return err
	}
}

// ProcessPipelineHook observes every command of a pipeline.
func (o Observer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		o.each(o.Before, cmds...)
		err := next(ctx, cmds)
		o.each(o.After, cmds...)
		return err
	}
}

func (o Observer) each(f func(redis.Cmder), cmds ...redis.Cmder) {
	if f == nil {
		return
	}
	for _, c := range cmds {
		f(c)
	}
}
