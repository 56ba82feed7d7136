package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A job's life after hand-off: show, cancel, wait and lifecycle (events
// is in events.go).

const showHelp = `Usage:
  rmqctl show TOPIC ID

Shows the message ID of TOPIC in whatever state it is: waiting, delayed,
in_flight, dead, or, while the topic retains finished messages ('rmqctl
lifecycle'), completed or cancelled. With its slot, attempts, last error,
times, the progress its running delivery reported, the result its handler
set and the whole body (text when printable, else base64). Exits 1 if there
is no such message.
`

const cancelHelp = `Usage:
  rmqctl cancel TOPIC ID

Cancels the message ID wherever it waits or runs: it is removed with its
body (a waiting one never runs; a running handler sees its context
cancelled and its ack is refused), its waiters are told, the event log
records "cancelled", and a retaining topic keeps it as cancelled. Exits 1
when no message with that id waits or runs (unknown, finished, or dead:
see 'rmqctl dead delete').
`

const waitHelp = `Usage:
  rmqctl wait TOPIC ID [--timeout D]

Waits until the message ID finishes and prints its final state and result
(as 'rmqctl show' does). A message that finished before is seen while the
topic retains it ('rmqctl lifecycle') or while it is dead. Redis tells the
waiter; nothing polls.

Exit status:
  0   completed
  1   error (Redis unreachable, unknown topic ...)
  2   usage error
  3   dead: it failed more often than allowed (the last error is printed)
  4   cancelled
  5   not found: never sent, no longer retained, or expired
  6   timed out: still waiting or running after D

Flags:
  --timeout D   give up after D (a Go duration); default: wait until it
                finishes or rmqctl is interrupted. The global --timeout
                does not bound the wait.
`

const lifecycleHelp = `Usage:
  rmqctl lifecycle TOPIC                                  show the settings
  rmqctl lifecycle TOPIC [--retention D] [--events N]     set them

What a topic keeps of its messages' life after hand-off, stored with the
topic: the stored settings win over the consumers' options, and running
consumers apply new ones from their next delivery. A flag not given keeps
its stored value.

Flags:
  --retention D   how long a completed or cancelled message stays readable
                  ('rmqctl show', 'rmqctl wait') with its result; 0: not at
                  all (a Go duration of whole ms, at most 720h)
  --events N      about how many events each slot's log keeps ('rmqctl
                  events'); 0: no log (at most 10000000)
`

// Exit statuses of wait beyond 0, 1 and 2.
const (
	exitDead      = 3
	exitCancelled = 4
	exitNotFound  = 5
	exitTimedOut  = 6
)

type messageJSON struct {
	ID           string            `json:"id"`
	Topic        string            `json:"topic"`
	Slot         int               `json:"slot"`
	State        string            `json:"state"`
	Attempts     int               `json:"attempts"`
	Snoozes      int               `json:"snoozes"`
	LastError    string            `json:"last_error"`
	FirstSentAt  string            `json:"first_sent_at,omitempty"`
	DueAt        string            `json:"due_at,omitempty"`
	Priority     int64             `json:"priority,omitempty"`
	Group        string            `json:"group,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	ExpiresAt    string            `json:"expires_at,omitempty"`
	LeaseUntil   string            `json:"lease_until,omitempty"`
	DiedAt       string            `json:"died_at,omitempty"`
	FinishedAt   string            `json:"finished_at,omitempty"`
	Progress     *string           `json:"progress,omitempty"`
	ProgressEnc  string            `json:"progress_encoding,omitempty"`
	Result       *string           `json:"result,omitempty"`
	ResultEnc    string            `json:"result_encoding,omitempty"`
	Body         string            `json:"body"`
	BodyEncoding string            `json:"body_encoding"`
}

func messageToJSON(m rmq.MessageInfo) messageJSON {
	body, enc := encodeBody(m.Body)
	out := messageJSON{
		ID: m.ID, Topic: m.Topic.Name(), Slot: m.Slot, State: string(m.State), Attempts: m.Attempts,
		Snoozes: m.Snoozes, LastError: m.LastError, FirstSentAt: fmtTime(m.FirstSentAt), DueAt: fmtTime(m.Due),
		Priority: m.Priority, Group: m.Group, Headers: m.Headers, ExpiresAt: fmtTime(m.ExpiresAt),
		LeaseUntil: fmtTime(m.LeaseUntil), DiedAt: fmtTime(m.DiedAt), FinishedAt: fmtTime(m.FinishedAt),
		Body: body, BodyEncoding: enc,
	}
	if m.Progress != nil {
		p, e := encodeBody(m.Progress)
		out.Progress, out.ProgressEnc = &p, e
	}
	if m.Result != nil {
		r, e := encodeBody(m.Result)
		out.Result, out.ResultEnc = &r, e
	}
	return out
}

// printMessage prints one message as show and wait do.
func (a *app) printMessage(t topic.Topic, m rmq.MessageInfo) error {
	if a.output == "json" {
		return writeJSON(a.stdout, messageToJSON(m))
	}
	tb := newTable(a.stdout, "id:", m.ID)
	tb.row("topic:", describe(t))
	tb.row("state:", string(m.State))
	tb.row("slot:", strconv.Itoa(m.Slot))
	tb.row("attempts:", strconv.Itoa(m.Attempts))
	tb.row("last error:", cell(m.LastError, 4096))
	tb.row("first sent:", cellTime(m.FirstSentAt))
	if t.Type().TimeBased() {
		tb.row("due:", cellTime(m.Due))
	} else {
		tb.row("priority:", strconv.FormatInt(m.Priority, 10))
	}
	if m.Group != "" {
		tb.row("group:", m.Group)
	}
	if !m.LeaseUntil.IsZero() {
		tb.row("lease until:", fmtTime(m.LeaseUntil))
	}
	if !m.DiedAt.IsZero() {
		tb.row("died:", fmtTime(m.DiedAt))
	}
	if !m.FinishedAt.IsZero() {
		tb.row("finished:", fmtTime(m.FinishedAt))
	}
	if m.Progress != nil {
		tb.row("progress:", bodyCell(m.Progress, 4096))
	}
	if m.State == rmq.StateCompleted || m.Result != nil {
		tb.row("result:", bodyCell(m.Result, 4096))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	body, enc := encodeBody(m.Body)
	fmt.Fprintf(a.stdout, "body (%s, %d bytes):\n%s\n", enc, len(m.Body), body)
	return nil
}

func (a *app) show(args []string) error {
	ctx, cancel, t, id, err := a.topicAndID("show", args)
	defer cancel()
	if err != nil {
		return err
	}
	m, err := a.insp.Message(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return fmt.Errorf("no message %q in %s: not found", id, t.Name())
	}
	if err != nil {
		return err
	}
	return a.printMessage(t, m)
}

func (a *app) cancel(args []string) error {
	ctx, cancel, t, id, err := a.topicAndID("cancel", args)
	defer cancel()
	if err != nil {
		return err
	}
	done, err := a.insp.Cancel(ctx, t, id)
	if err != nil {
		return err
	}
	if a.output == "json" {
		if err := writeJSON(a.stdout, map[string]any{"topic": t.Name(), "id": id, "cancelled": done}); err != nil {
			return err
		}
	} else if done {
		fmt.Fprintf(a.stdout, "cancelled %s of %s\n", id, t.Name())
	}
	if !done {
		return fmt.Errorf("no waiting or running message %q in %s", id, t.Name())
	}
	return nil
}

// interruptible is ctx ended by SIGINT or SIGTERM too: wait and events
// --follow run until they are interrupted.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// client is an rmq client for Wait and Events; never started, since it
// runs no consumer.
func (a *app) client() (*rmq.Client, error) {
	return rmq.New(a.rdb, rmq.WithPrefix(a.prefix))
}

func (a *app) wait(args []string) error {
	c := find("wait")
	fs := c.flags()
	timeout := fs.Duration("timeout", 0, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC", "ID")
	if err != nil {
		return err
	}
	if *timeout < 0 {
		return usagef(c.name, "wait: --timeout %s: want 0 (none) or more", *timeout)
	}
	cctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(cctx, pos[0])
	if err != nil {
		return err
	}
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close(context.Background())
	ctx, stop := interruptible(context.Background())
	defer stop()
	if *timeout > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeoutCause(ctx, *timeout, errWaitTimedOut)
		defer cancelT()
	}
	m, err := cl.Wait(ctx, t, pos[1])
	switch {
	case err == nil:
		return a.printMessage(t, m)
	case errors.Is(err, rmq.ErrDead):
		if perr := a.printMessage(t, m); perr != nil {
			return perr
		}
		return &codeError{exitDead, fmt.Sprintf("%s of %s is dead: %s", pos[1], t.Name(), m.LastError)}
	case errors.Is(err, rmq.ErrCancelled):
		if m.ID != "" {
			if perr := a.printMessage(t, m); perr != nil {
				return perr
			}
		}
		return &codeError{exitCancelled, fmt.Sprintf("%s of %s was cancelled", pos[1], t.Name())}
	case errors.Is(err, rmq.ErrMessageNotFound):
		return &codeError{exitNotFound, fmt.Sprintf("no message %q in %s: not found (never sent, no longer retained, or expired)", pos[1], t.Name())}
	case context.Cause(ctx) == errWaitTimedOut:
		return &codeError{exitTimedOut, fmt.Sprintf("%s of %s did not finish within %s", pos[1], t.Name(), *timeout)}
	}
	return err
}

var errWaitTimedOut = errors.New("wait timed out")

func (a *app) lifecycle(args []string) error {
	c := find("lifecycle")
	fs := c.flags()
	retention := fs.Duration("retention", 0, "")
	events := fs.Int("events", 0, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	l, err := a.insp.Lifecycle(ctx, t)
	if err != nil {
		return err
	}
	if len(set) > 0 {
		if set["retention"] {
			l.Retention = *retention
		}
		if set["events"] {
			l.Events = *events
		}
		err := a.insp.SetLifecycle(ctx, t, l)
		if errors.Is(err, rmq.ErrInvalidLifecycle) {
			return usagef(c.name, "lifecycle: %v", err)
		}
		if err != nil {
			return err
		}
		if l, err = a.insp.Lifecycle(ctx, t); err != nil {
			return err
		}
	}
	if a.output == "json" {
		return writeJSON(a.stdout, map[string]any{"topic": t.Name(), "retention": l.Retention.String(),
			"retention_ms": l.Retention.Milliseconds(), "events": l.Events})
	}
	fmt.Fprintf(a.stdout, "%s: retention=%s events=%d\n", t.Name(), l.Retention, l.Events)
	return nil
}
