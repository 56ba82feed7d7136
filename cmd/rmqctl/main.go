// Command rmqctl inspects and repairs RMQ queues in Redis: it lists
// topics, shows their statistics and waiting messages, and lists, shows,
// requeues and deletes dead messages.
//
//	rmqctl [--redis ADDR | --cluster ADDR,...] [--prefix P] [-o table|json] COMMAND
//
// Run "rmqctl help" for the commands, "rmqctl help COMMAND" for one of them.
// Exit status: 0 success, 1 error (or a declined confirmation), 2 usage.
package main

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs connection retries itself; rmqctl reports the error.
	redis.SetLogger(quiet{})
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
