package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a mistake in the command line: exit 2, with a hint.
type usageError struct {
	msg  string
	help string // command whose help is hinted at ("" for the global one)
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), help: cmd}
}

// codeError ends rmqctl with an exit status of its own (wait's outcomes).
type codeError struct {
	code int
	msg  string
}

func (e *codeError) Error() string { return e.msg }

// errHelp is returned when -h or --help asked for a command's help, which
// was printed: exit 0.
var errHelp = errors.New("help requested")

// app is one run of rmqctl.
type app struct {
	stdin          *bufio.Reader
	stdout, stderr io.Writer

	conn    connFlags
	target  *target
	prefix  string
	output  string
	timeout time.Duration

	rdb  redis.UniversalClient
	insp *rmq.Inspector
}

// run executes rmqctl with args (without the program name) and returns the
// exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr}
	err := a.main(args)
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
	var ue *usageError
	var ce *codeError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "rmqctl: %s\n", ce.msg)
		return ce.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "rmqctl: %s\n", ue.msg)
		hint := "rmqctl help"
		if ue.help != "" {
			hint += " " + ue.help
		}
		fmt.Fprintf(stderr, "Run '%s' for usage.\n", hint)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "rmqctl: %v\n", err)
		return exitError
	}
}

func (a *app) main(args []string) error {
	fs := flag.NewFlagSet("rmqctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.conn.url, "url", "", "")
	fs.StringVar(&a.conn.redis, "redis", "", "")
	fs.StringVar(&a.conn.cluster, "cluster", "", "")
	fs.StringVar(&a.conn.tlsCA, "tls-ca", "", "")
	fs.StringVar(&a.conn.tlsName, "tls-server-name", "", "")
	fs.StringVar(&a.prefix, "prefix", "rmq", "")
	fs.StringVar(&a.output, "o", "table", "")
	fs.StringVar(&a.output, "output", "table", "")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(a.stdout, globalHelp)
			return errHelp
		}
		return usagef("", "%v", err)
	}
	a.conn.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { a.conn.set[f.Name] = true })
	if a.output != "table" && a.output != "json" {
		return usagef("", "-o %q: want table or json", a.output)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("", "no command given")
	}
	cmd, err := lookup(rest)
	if err != nil {
		return err
	}
	if cmd.run == nil { // "help"
		return a.help(rest[1:])
	}
	// Resolved before any command runs, so a wrong connection flag is a
	// usage error (exit 2) and nothing is dialled.
	if a.target, err = a.conn.resolveTarget(os.Getenv); err != nil {
		return err
	}
	cargs := rest[len(strings.Fields(cmd.name)):]
	return cmd.run(a, cargs)
}

// context bounds one command by --timeout.
func (a *app) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout)
}

// topic connects and looks a topic up by name.
func (a *app) topic(ctx context.Context, name string) (topic.Topic, error) {
	if err := a.connect(ctx); err != nil {
		return topic.Topic{}, err
	}
	t, err := a.insp.Topic(ctx, name)
	if errors.Is(err, rmq.ErrUnknownTopic) {
		return t, fmt.Errorf("unknown topic %q under prefix %q ('rmqctl topics' lists them)", name, a.prefix)
	}
	return t, err
}

// confirm asks a yes/no question on stderr and reads the answer from
// stdin; anything but y or yes (or end of input) is no.
func (a *app) confirm(question string) bool {
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := a.stdin.ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// parseFlags parses a command's flags, which may come before, between or
// after its positional arguments ("--" ends the flags), and returns the
// positional arguments. -h and --help print the command's help.
// parseArgs parses a command's flags and checks that exactly the
// positional arguments names were given.
func (a *app) parseArgs(cmd *command, fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	pos, err := a.parseFlags(cmd, fs, args)
	if err != nil {
		return nil, err
	}
	return pos, wantArgs(cmd, pos, names...)
}

func (a *app) parseFlags(cmd *command, fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(a.stdout, cmd.help)
				return nil, errHelp
			}
			return nil, usagef(cmd.name, "%s: %v", cmd.name, err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// topicAndID parses the TOPIC ID arguments of the command name and finds
// the topic; the caller defers cancel, which ends ctx, whatever err is.
func (a *app) topicAndID(name string, args []string) (ctx context.Context, cancel context.CancelFunc, t topic.Topic, id string, err error) {
	ctx, cancel = a.context()
	c := find(name)
	pos, err := a.parseArgs(c, c.flags(), args, "TOPIC", "ID")
	if err != nil {
		return ctx, cancel, t, "", err
	}
	t, err = a.topic(ctx, pos[0])
	return ctx, cancel, t, pos[1], err
}
