// Command rmqctl inspects and repairs RMQ queues in Redis: it lists
// topics, shows their statistics and waiting messages, and lists, shows,
// requeues and deletes dead messages; it shows, cancels and waits for one
// message and prints or follows a topic's event log.
//
//	rmqctl [--url URL | --redis ADDR | --cluster SEEDS] [--tls-ca FILE] [--prefix P] [-o table|json] COMMAND
//
// URL is redis://USER:PASSWORD@HOST:PORT/DB, rediss://... for TLS, or
// unix:///PATH; $REDIS_URL gives it without putting the password on the
// command line.
//
// Run "rmqctl help" for the commands, "rmqctl help COMMAND" for one of them.
// Exit status: 0 success, 1 error (or a declined confirmation), 2 usage;
// wait exits 3 dead, 4 cancelled, 5 not found, 6 timed out.
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
