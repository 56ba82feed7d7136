package main

import (
	"flag"
	"fmt"
	"strings"
)

// command is one rmqctl command; name has one or two words ("dead list").
type command struct {
	name    string
	summary string
	help    string
	run     func(a *app, args []string) error // nil for "help"
}

var commands []*command

func init() {
	commands = []*command{
		{name: "topics", summary: "list the topics with their queue sizes", help: topicsHelp, run: (*app).topics},
		{name: "stats", summary: "show the queue sizes and due times of a topic", help: statsHelp, run: (*app).stats},
		{name: "peek", summary: "list waiting messages in delivery order", help: peekHelp, run: (*app).peek},
		{name: "remove", summary: "delete a message by id, waiting or in flight", help: removeHelp, run: (*app).remove},
		{name: "pause", summary: "stop every consumer of a topic from fetching", help: pauseHelp, run: (*app).pause},
		{name: "resume", summary: "let the consumers of a paused topic fetch again", help: resumeHelp, run: (*app).resume},
		{name: "limits", summary: "show or set a topic's fleet-wide flow limits", help: limitsHelp, run: (*app).limits},
		{name: "show", summary: "show one message in any state, finished ones too", help: showHelp, run: (*app).show},
		{name: "flow", summary: "draw the flow (parents and children) below a message", help: flowHelp, run: (*app).flow},
		{name: "cancel", summary: "cancel a message, waiting or in flight", help: cancelHelp, run: (*app).cancel},
		{name: "wait", summary: "wait until a message finishes; the exit status says how", help: waitHelp, run: (*app).wait},
		{name: "events", summary: "print a topic's event log, or follow it", help: eventsHelp, run: (*app).events},
		{name: "lifecycle", summary: "show or set what a topic keeps of finished messages", help: lifecycleHelp, run: (*app).lifecycle},
		{name: "history", summary: "show a topic's per-minute history: sent, completed, failed", help: historyHelp, run: (*app).history},
		{name: "workers", summary: "list the running clients with their topics", help: workersHelp, run: (*app).workers},
		{name: "dead list", summary: "list dead messages, newest first, a page at a time", help: deadListHelp, run: (*app).deadList},
		{name: "dead show", summary: "show one dead message with its body", help: deadShowHelp, run: (*app).deadShow},
		{name: "dead requeue", summary: "put dead messages back as fresh messages", help: deadRequeueHelp, run: (*app).deadRequeue},
		{name: "dead delete", summary: "delete dead messages with their bodies", help: deadDeleteHelp, run: (*app).deadDelete},
		{name: "help", summary: "show help for rmqctl or a command", help: helpHelp},
	}
	commands = append(commands, scheduleCommands...) // schedules.go
	globalHelp = globalHelpHead + commandList() + globalHelpTail
}

// lookup finds the command named by the first one or two words of args.
func lookup(args []string) (*command, error) {
	if len(args) >= 2 {
		two := args[0] + " " + args[1]
		for _, c := range commands {
			if c.name == two {
				return c, nil
			}
		}
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c, nil
		}
	}
	if args[0] == "schedules" {
		return nil, usagef("schedules", "schedules: missing or unknown subcommand (list, get, set, remove, pause, resume, trigger)")
	}
	if args[0] == "dead" {
		if len(args) == 1 {
			return nil, usagef("dead", "dead: missing subcommand (list, show, requeue or delete)")
		}
		return nil, usagef("dead", "dead: unknown subcommand %q", args[1])
	}
	return nil, usagef("", "unknown command %q", args[0])
}

// help prints the help of the command args names, or the global help.
func (a *app) help(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(a.stdout, globalHelp)
		return nil
	}
	if len(args) == 1 && args[0] == "dead" {
		fmt.Fprint(a.stdout, deadHelp)
		return nil
	}
	if len(args) == 1 && args[0] == "schedules" {
		fmt.Fprint(a.stdout, schedulesHelp)
		return nil
	}
	c, err := lookup(args)
	if err != nil {
		return err
	}
	fmt.Fprint(a.stdout, c.help)
	return nil
}

// flags returns an empty flag set for c; -h and --help are built in.
func (c *command) flags() *flag.FlagSet {
	return flag.NewFlagSet(c.name, flag.ContinueOnError)
}

func find(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	panic("rmqctl: no command " + name)
}

// wantArgs checks the number of positional arguments.
func wantArgs(c *command, args []string, names ...string) error {
	if len(args) < len(names) {
		return usagef(c.name, "%s: missing %s", c.name, strings.Join(names[len(args):], " "))
	}
	if len(args) > len(names) {
		return usagef(c.name, "%s: unexpected argument %q", c.name, args[len(names)])
	}
	return nil
}

// globalHelp is built by init, once the commands are known.
var globalHelp string

const globalHelpHead = `rmqctl inspects and repairs RMQ queues in Redis.

Usage:
  rmqctl [global flags] COMMAND [arguments] [flags]

Commands:
`

const globalHelpTail = `
Global flags:
  --url URL            one Redis server: redis://[USER:PASSWORD@]HOST:PORT[/DB],
                       rediss://... for TLS, unix:///PATH?db=N
  --redis ADDR         one Redis server by HOST:PORT, no password
                       (default 127.0.0.1:6379)
  --cluster SEEDS      Redis Cluster: HOST:PORT,HOST:PORT,... or one URL
                       redis[s]://[USER:PASSWORD@]HOST:PORT?addr=HOST:PORT&...
  --tls-ca FILE        PEM CA bundle that signed the server's certificate
                       (rediss:// only; default: the system's roots)
  --tls-server-name N  the name the certificate must carry, when it is not
                       the host dialled (an SSH tunnel, an IP address)
  --prefix P           key prefix the topics live under (default "rmq")
  -o, --output FORMAT  table (default) or json; json is stable for scripts
  --timeout D          bound on each command (default 30s)

At most one of --url, --redis and --cluster. Without any, $REDIS_URL names
the Redis, as for rmqd and the examples: a URL as for --url, HOST:PORT, or a
comma-separated list of URLs for a cluster's seeds. The older variables
still work and, when set, come first: $RMQ_CLUSTER (as --cluster), then
$RMQ_REDIS (as --redis). A password in $REDIS_URL stays out of the process
list, where --url would show it.

Bodies are shown as text when they are printable UTF-8, else as base64.
Commands that requeue or delete more than one message ask for
confirmation on the terminal unless --yes is given.

Exit status: 0 success, 1 error or declined confirmation, 2 usage error;
'wait' adds its own for a message that did not complete (see its help).
Run 'rmqctl help COMMAND' for the help of one command.
`

// commandList lists every command in the order of commands, help last: a
// command added to the table is in the usage text without a second list
// to keep.
func commandList() string {
	var b strings.Builder
	for _, c := range commands {
		if c.name != "help" {
			fmt.Fprintf(&b, "  %-18s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(&b, "  %-18s %s\n", "help", find("help").summary)
	return b.String()
}

const deadHelp = `Usage:
  rmqctl dead list TOPIC [--limit N] [--cursor C]
  rmqctl dead show TOPIC ID
  rmqctl dead requeue TOPIC (ID... | --all) [--yes]
  rmqctl dead delete TOPIC (ID... | --all) [--yes]

A message is dead when it failed more often than its consumer's
MaxRetries allows. Run 'rmqctl help dead SUBCOMMAND' for details.
`

const topicsHelp = `Usage:
  rmqctl topics

Lists every topic defined under the prefix with its type, slot amount and
the sizes of its queues: WAITING (store), IN-FLIGHT (prepare) and DEAD.
`

const statsHelp = `Usage:
  rmqctl stats TOPIC [--slots]

Shows the sizes of TOPIC's queues: waiting messages (and how many of them
are due now), deliveries in flight and dead messages; for time-based
topics the next due time (how long it is overdue, if it is), for priority
topics the top priority; the times of the oldest and newest death; the
finished messages the topic retains and its event log's length, when it
keeps them ('rmqctl lifecycle').

Flags:
  --slots   also list every slot that holds a message
`

const peekHelp = `Usage:
  rmqctl peek TOPIC [--limit N]

Lists waiting messages in the order consumers take them: earliest due first
(range-merge and fixed-time topics, not-yet-due ones included), highest
priority first (priority topics). IN-FLIGHT marks an id whose earlier
delivery is being handled; this one waits for it. Nothing is changed.

Flags:
  --limit N   at most N messages (default 20, at most 10000)
`

const removeHelp = `Usage:
  rmqctl remove TOPIC ID

Deletes the message ID and its body wherever it waits or runs, as
Producer.Remove does (a running delivery's ack is then refused). Exits 1
when no message with that id waits or runs (unknown, or dead: see
'rmqctl dead delete').
`

const deadListHelp = `Usage:
  rmqctl dead list TOPIC [--limit N] [--cursor C]

Lists TOPIC's dead messages, newest death first (then by slot and id),
with attempts, last error and body. When the page is full the command
prints the cursor of the next page; pass it with --cursor. A cursor names
a position (time of death, slot, id), so it stays valid while messages are
requeued or deleted; each page reads only the entries it shows.

Flags:
  --limit N    page size (default 20, at most 10000)
  --cursor C   continue after the position C names
`

const deadShowHelp = `Usage:
  rmqctl dead show TOPIC ID

Shows the dead message ID of TOPIC: slot, attempts, last error, first-sent
time, time of death, due time or priority, and the whole body (text when
printable, else base64). Exits 1 if there is no such dead message.
`

const deadRequeueHelp = `Usage:
  rmqctl dead requeue TOPIC ID... [--yes]
  rmqctl dead requeue TOPIC --all [--yes]

Puts dead messages back as fresh messages: no failed attempts, no last
error; fixed-time and range-merge messages are due now, priority messages
get the priority they were sent with. A message with the same id that
waits already absorbs the requeued one (it keeps its newer body; it is
never delayed); one being handled is followed by the requeued one.
--all requeues every message that died before the command started.

Flags:
  --all   requeue the whole dead queue
  --yes   do not ask for confirmation (asked when more than one message)
`

const deadDeleteHelp = `Usage:
  rmqctl dead delete TOPIC ID... [--yes]
  rmqctl dead delete TOPIC --all [--yes]

Deletes dead messages and their bodies for good.

Flags:
  --all   delete the whole dead queue
  --yes   do not ask for confirmation (asked when more than one message)
`

const helpHelp = `Usage:
  rmqctl help [COMMAND]

Shows the help of rmqctl, or of one command ('rmqctl help dead list').
'rmqctl COMMAND -h' does the same.
`
