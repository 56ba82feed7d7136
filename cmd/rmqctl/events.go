package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

const eventsHelp = `Usage:
  rmqctl events TOPIC [--after CURSOR] [--follow]

Prints TOPIC's recorded events, one a line, oldest first within a slot
(the slots' events interleave):
  TIME  TYPE  ID  ATTEMPT  DATA  'CURSOR'
TYPE is sent, delivered, progress, completed, retried, dead, removed,
expired or cancelled; DATA the result (completed), the progress (progress)
or the error (retried, dead), escaped and cut to 60 characters ("-" for
none); CURSOR, in quotes, resumes right after that event:
  rmqctl events orders --after 'e1 3=1733580000000-0'
With -o json each event is one JSON object on a line of its own, with the
whole data and its encoding.

Without --follow, rmqctl prints the events recorded when it started, from
the oldest each slot's log keeps (or after CURSOR), and exits. With
--follow it goes on printing new events as they are recorded, until it is
interrupted; the global --timeout does not bound it. --after now follows
only the events recorded from now on.

A topic records events only while its lifecycle keeps a log ('rmqctl
lifecycle TOPIC --events N').

Flags:
  --after CURSOR   start right after CURSOR (default: the oldest kept)
  --follow, -f     keep printing new events until interrupted
`

type eventJSON struct {
	Cursor       string `json:"cursor"`
	Time         string `json:"time"`
	Type         string `json:"type"`
	ID           string `json:"id"`
	Attempt      int    `json:"attempt"`
	Data         string `json:"data"`
	DataEncoding string `json:"data_encoding"`
}

func (a *app) events(args []string) error {
	c := find("events")
	fs := c.flags()
	after := fs.String("after", "0", "")
	follow := fs.Bool("follow", false, "")
	fs.BoolVar(follow, "f", false, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	from := *after
	switch {
	case from == "now" && !*follow:
		return usagef(c.name, "events: --after now needs --follow: nothing was recorded after now yet")
	case from == "now":
		from = ""
	case from == "":
		return usagef(c.name, "events: --after: want a cursor, 0 or now")
	}
	cctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(cctx, pos[0])
	if err != nil {
		return err
	}
	if l, err := a.insp.Lifecycle(cctx, t); err == nil && l.Events == 0 {
		fmt.Fprintf(a.stderr, "rmqctl: note: %s keeps no event log now ('rmqctl lifecycle %s --events N')\n", t.Name(), t.Name())
	}
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close(context.Background())
	if *follow {
		ctx, stop := interruptible(context.Background())
		defer stop()
		for e, err := range cl.Events(ctx, t, from) {
			if err != nil {
				if ctx.Err() != nil {
					return nil // interrupted: the normal end of a follow
				}
				return a.eventsErr(c, t, err)
			}
			if err := a.printEvent(e); err != nil {
				return err
			}
		}
		return nil
	}
	return a.eventsUntilNow(cctx, c, t, cl, from)
}

// eventsUntilNow prints the events recorded before it started. It takes
// every slot's log's last entry first, then follows from "from" and stops
// once every slot's position reached its end: exact, whatever the load,
// with no idle timeout. An event a slot records after the start is not
// printed.
func (a *app) eventsUntilNow(ctx context.Context, c *command, t topic.Topic, cl *rmq.Client, from string) error {
	n := t.SlotAmount()
	ends, err := a.logEnds(ctx, t)
	if err != nil {
		return err
	}
	pos, err := cursorPositions(from, n)
	if err != nil {
		return a.eventsErr(c, t, fmt.Errorf("%w: %q", rmq.ErrInvalidEventCursor, from))
	}
	if reached(pos, ends) {
		return nil
	}
	for e, err := range cl.Events(ctx, t, from) {
		if err != nil {
			return a.eventsErr(c, t, err)
		}
		next, perr := cursorPositions(e.Cursor, n)
		if perr != nil {
			return fmt.Errorf("events: unexpected cursor %q: %w", e.Cursor, perr)
		}
		slot := -1
		for i := range next {
			if next[i] != pos[i] {
				slot = i
				break
			}
		}
		pos = next
		if slot < 0 || compareIDs(pos[slot], ends[slot]) <= 0 {
			if err := a.printEvent(e); err != nil {
				return err
			}
		}
		if reached(pos, ends) {
			return nil
		}
	}
	return nil
}

func (a *app) eventsErr(c *command, t topic.Topic, err error) error {
	if errors.Is(err, rmq.ErrInvalidEventCursor) {
		return usagef(c.name, "events: --after: not a cursor of %s", t.Name())
	}
	return err
}

func (a *app) printEvent(e rmq.Event) error {
	if a.output == "json" {
		data, enc := encodeBody(e.Data)
		return writeJSONLine(a, eventJSON{Cursor: e.Cursor, Time: fmtTime(e.Time), Type: string(e.Type),
			ID: e.MessageID, Attempt: e.Attempt, Data: data, DataEncoding: enc})
	}
	data := "-"
	if len(e.Data) > 0 {
		data = bodyCell(e.Data, 60)
	}
	_, err := fmt.Fprintf(a.stdout, "%s  %-9s  %s  %d  %s  '%s'\n", fmtTime(e.Time), e.Type, cell(e.MessageID, 200), e.Attempt, data, e.Cursor)
	return err
}

// writeJSONLine writes v as one line, for streams of objects.
func writeJSONLine(a *app, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = a.stdout.Write(append(b, '\n'))
	return err
}

// logEnds returns the id of every slot's log's last entry ("0-0" for an
// empty or absent log).
func (a *app) logEnds(ctx context.Context, t topic.Topic) ([]string, error) {
	cmds := make([]*redis.XMessageSliceCmd, t.SlotAmount())
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s := range cmds {
			cmds[s] = p.XRevRangeN(ctx, keyspace.LifeKeysFor(a.prefix, t.Name(), s).Events, "+", "-", 1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("events: read the logs' ends: %w", err)
	}
	out := make([]string, len(cmds))
	for s, c := range cmds {
		out[s] = "0-0"
		if ms := c.Val(); len(ms) > 0 {
			out[s] = ms[0].ID
		}
	}
	return out, nil
}

// cursorPositions reads the per-slot stream positions an event cursor
// names ("0": none read yet). The format is rmq's (internal/life): "e1"
// then "SLOT=ID" for each slot whose position is not 0-0.
func cursorPositions(s string, n int) ([]string, error) {
	pos := make([]string, n)
	for i := range pos {
		pos[i] = "0-0"
	}
	if s == "0" {
		return pos, nil
	}
	f := strings.Fields(s)
	if len(f) == 0 || f[0] != "e1" {
		return nil, errors.New("not an event cursor")
	}
	for _, part := range f[1:] {
		is, id, ok := strings.Cut(part, "=")
		i, err := strconv.Atoi(is)
		if !ok || err != nil || i < 0 || i >= n {
			return nil, errors.New("not an event cursor of this topic")
		}
		if _, _, err := parseID(id); err != nil {
			return nil, err
		}
		pos[i] = id
	}
	return pos, nil
}

// reached reports whether every slot's position is at or past its end.
func reached(pos, ends []string) bool {
	for i := range pos {
		if compareIDs(pos[i], ends[i]) < 0 {
			return false
		}
	}
	return true
}

// compareIDs orders stream entry ids "ms-seq".
func compareIDs(x, y string) int {
	xm, xs, _ := parseID(x)
	ym, ys, _ := parseID(y)
	switch {
	case xm != ym:
		return cmpU(xm, ym)
	default:
		return cmpU(xs, ys)
	}
}

func cmpU(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func parseID(id string) (ms, seq uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad stream id %q", id)
	}
	if ms, err = strconv.ParseUint(a, 10, 64); err != nil {
		return 0, 0, err
	}
	seq, err = strconv.ParseUint(b, 10, 64)
	return ms, seq, err
}
