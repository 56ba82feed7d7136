package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// scheduleCommands are the "schedules ..." commands, in the order of the
// help.
var scheduleCommands = []*command{
	{name: "schedules list", summary: "list the schedules with their next and last firing", help: schedulesListHelp, run: (*app).schedulesList},
	{name: "schedules get", summary: "show one schedule", help: schedulesGetHelp, run: (*app).schedulesGet},
	{name: "schedules set", summary: "create or replace a schedule", help: schedulesSetHelp, run: (*app).schedulesSet},
	{name: "schedules remove", summary: "delete a schedule and its pending tick", help: schedulesRemoveHelp, run: (*app).schedulesRemove},
	{name: "schedules pause", summary: "stop a schedule at its next tick", help: schedulesPauseHelp, run: (*app).schedulesPause},
	{name: "schedules resume", summary: "restart a paused schedule from its next tick", help: schedulesResumeHelp, run: (*app).schedulesResume},
	{name: "schedules trigger", summary: "fire a schedule once now", help: schedulesTriggerHelp, run: (*app).schedulesTrigger},
}

const schedulesHelp = `Usage:
  rmqctl schedules list
  rmqctl schedules get NAME
  rmqctl schedules set NAME --spec SPEC --topic TOPIC (--body B | --body-file F)
                       [--tz AREA/CITY] [--catch-up D] [--priority P] [--paused]
  rmqctl schedules remove|pause|resume|trigger NAME

A schedule sends one message on its topic at every tick of its spec, with
the id NAME@<tick as Unix ms>; every running client of the prefix takes part
and each tick fires once. Run 'rmqctl help schedules SUBCOMMAND' for details.
`

const schedulesListHelp = `Usage:
  rmqctl schedules list

Lists every schedule under the prefix: its spec and time zone, topic, state,
next and last firing, and how many ticks fired and were skipped.
`

const schedulesGetHelp = `Usage:
  rmqctl schedules get NAME

Shows one schedule with its body and tick options.
`

const schedulesSetHelp = `Usage:
  rmqctl schedules set NAME --spec SPEC --topic TOPIC (--body B | --body-file F) [flags]

Creates the schedule NAME, or replaces it: the old pending tick goes (unless
due already) and the next tick of the new spec is sent ahead.

Flags:
  --spec SPEC        cron "m h dom mon dow" (six fields when the first is
                     seconds), @hourly, @daily, @weekly, @monthly, @yearly,
                     "@every 90s"; optionally "CRON_TZ=Area/City " first
  --topic TOPIC      a defined fixed-time or priority topic
  --body B           the body of each tick
  --body-file F      the body, read from file F ("-": standard input)
  --tz AREA/CITY     where the spec's wall clock is read (default UTC)
  --catch-up D       ticks missed while no client ran are fired if at most
                     D old (default 0: skipped)
  --priority P       priority of each tick (priority topics: 17 or more)
  --paused           store it paused
`

const schedulesRemoveHelp = `Usage:
  rmqctl schedules remove NAME

Deletes the schedule NAME and its pending tick (unless due already).
`

const schedulesPauseHelp = `Usage:
  rmqctl schedules pause NAME

Pauses NAME: its pending tick is removed (unless due already) and no tick
fires until 'rmqctl schedules resume NAME'.
`

const schedulesResumeHelp = `Usage:
  rmqctl schedules resume NAME

Resumes NAME from its next tick after now; ticks that passed while it was
paused are not fired.
`

const schedulesTriggerHelp = `Usage:
  rmqctl schedules trigger NAME

Fires NAME once now, besides its ticks, and prints the message id.
`

// scheduleJSON is a schedule as 'schedules list' and 'get' print it.
type scheduleJSON struct {
	Name         string            `json:"name"`
	Spec         string            `json:"spec"`
	TimeZone     string            `json:"tz"`
	Topic        string            `json:"topic"`
	Priority     int64             `json:"priority,omitempty"`
	CatchUp      string            `json:"catch_up"`
	Paused       bool              `json:"paused"`
	Next         string            `json:"next,omitempty"`
	LastFired    string            `json:"last_fired,omitempty"`
	Fired        int64             `json:"fired"`
	Skipped      int64             `json:"skipped"`
	UpdatedAt    string            `json:"updated_at"`
	Body         string            `json:"body,omitempty"`
	BodyEncoding string            `json:"body_encoding,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	MaxRetries   *int              `json:"max_retries,omitempty"`
	TTL          string            `json:"ttl,omitempty"`
	Timeout      string            `json:"timeout,omitempty"`
}

func scheduleToJSON(s rmq.ScheduleInfo, withBody bool) scheduleJSON {
	j := scheduleJSON{
		Name: s.Name, Spec: s.Spec, TimeZone: s.Location.String(), Topic: s.Topic.Name(), Priority: s.Priority,
		CatchUp: s.CatchUp.String(), Paused: s.Paused, Next: fmtTime(s.Next), LastFired: fmtTime(s.LastFired),
		Fired: s.Fired, Skipped: s.Skipped, UpdatedAt: fmtTime(s.UpdatedAt),
	}
	if withBody {
		j.Body, j.BodyEncoding = encodeBody(s.Body)
		j.Headers = s.Message.Headers
		if s.Message.MaxRetries >= 0 {
			j.MaxRetries = &s.Message.MaxRetries
		}
		if s.Message.TTL > 0 {
			j.TTL = s.Message.TTL.String()
		}
		if s.Message.Timeout > 0 {
			j.Timeout = s.Message.Timeout.String()
		}
	}
	return j
}

// schedules connects and returns the prefix's schedules.
func (a *app) schedules() (*rmq.Schedules, func(), error) {
	ctx, cancel := a.context()
	if err := a.connect(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return rmq.NewSchedules(a.rdb, rmq.WithPrefix(a.prefix)), cancel, nil
}

// notFound words ErrScheduleNotFound for the terminal.
func (a *app) notFound(name string, err error) error {
	if errors.Is(err, rmq.ErrScheduleNotFound) {
		return fmt.Errorf("no schedule %q under prefix %q ('rmqctl schedules list' lists them)", name, a.prefix)
	}
	return err
}

func (a *app) schedulesList(args []string) error {
	c := find("schedules list")
	if _, err := a.parseArgs(c, c.flags(), args); err != nil {
		return err
	}
	s, cancel, err := a.schedules()
	if err != nil {
		return err
	}
	defer cancel()
	ctx, done := a.context()
	defer done()
	list, err := s.List(ctx)
	if err != nil {
		return err
	}
	if a.output == "json" {
		out := make([]scheduleJSON, len(list))
		for i, sc := range list {
			out[i] = scheduleToJSON(sc, false)
		}
		return writeJSON(a.stdout, out)
	}
	tb := newTable(a.stdout, "NAME", "SPEC", "TZ", "TOPIC", "STATE", "NEXT", "LAST", "FIRED", "SKIPPED")
	for _, sc := range list {
		state := "running"
		if sc.Paused {
			state = "paused"
		}
		tb.row(sc.Name, cell(sc.Spec, 40), sc.Location.String(), sc.Topic.Name(), state, cellTime(sc.Next), cellTime(sc.LastFired), itoa(sc.Fired), itoa(sc.Skipped))
	}
	return tb.flush()
}

func (a *app) schedulesGet(args []string) error {
	return a.onSchedule("schedules get", args, a.scheduleGet)
}

func (a *app) scheduleGet(ctx context.Context, s *rmq.Schedules, name string) error {
	sc, err := s.Get(ctx, name)
	if err != nil {
		return a.notFound(name, err)
	}
	j := scheduleToJSON(sc, true)
	if a.output == "json" {
		return writeJSON(a.stdout, j)
	}
	tb := newTable(a.stdout, "FIELD", "VALUE")
	rows := [][2]string{
		{"name", j.Name}, {"spec", j.Spec}, {"tz", j.TimeZone}, {"topic", describe(sc.Topic)},
		{"priority", itoa(j.Priority)}, {"catch-up", j.CatchUp}, {"paused", fmt.Sprint(j.Paused)},
		{"next", cellTime(sc.Next)}, {"last fired", cellTime(sc.LastFired)}, {"fired", itoa(j.Fired)},
		{"skipped", itoa(j.Skipped)}, {"updated", cellTime(sc.UpdatedAt)}, {"body", bodyCell(sc.Body, 200)},
	}
	for _, r := range rows {
		tb.row(r[0], r[1])
	}
	for k, v := range j.Headers {
		tb.row("header "+k, cell(v, 100))
	}
	return tb.flush()
}

// headerFlags collects --header KEY=VALUE.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }
func (h headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	h[k] = val
	return nil
}

func (a *app) schedulesSet(args []string) error {
	c := find("schedules set")
	fs := c.flags()
	spec := fs.String("spec", "", "")
	topicName := fs.String("topic", "", "")
	body := fs.String("body", "", "")
	bodyFile := fs.String("body-file", "", "")
	tz := fs.String("tz", "", "")
	catchUp := fs.Duration("catch-up", 0, "")
	priority := fs.Int64("priority", 0, "")
	paused := fs.Bool("paused", false, "")
	headers := headerFlags{}
	fs.Var(headers, "header", "")
	pos, err := a.parseArgs(c, fs, args, "NAME")
	if err != nil {
		return err
	}
	switch {
	case *spec == "":
		return usagef(c.name, "%s: --spec is required", c.name)
	case *topicName == "":
		return usagef(c.name, "%s: --topic is required", c.name)
	case (*body == "") == (*bodyFile == ""):
		return usagef(c.name, "%s: give one of --body and --body-file", c.name)
	}
	b := []byte(*body)
	if *bodyFile != "" {
		if *bodyFile == "-" {
			b, err = io.ReadAll(a.stdin)
		} else {
			b, err = os.ReadFile(*bodyFile)
		}
		if err != nil {
			return fmt.Errorf("read the body: %w", err)
		}
	}
	var loc *time.Location
	if *tz != "" {
		if loc, err = time.LoadLocation(*tz); err != nil {
			return usagef(c.name, "%s: --tz %q: %v", c.name, *tz, err)
		}
	}
	s, cancel, err := a.schedules()
	if err != nil {
		return err
	}
	defer cancel()
	ctx, done := a.context()
	defer done()
	t, err := a.topic(ctx, *topicName)
	if err != nil {
		return err
	}
	sc := rmq.Schedule{Name: pos[0], Spec: *spec, Location: loc, Topic: t, Priority: *priority, Body: b, CatchUp: *catchUp, Paused: *paused}
	if len(headers) > 0 {
		sc.Options = []producer.SendOption{producer.WithHeaders(headers)}
	}
	if err := s.Set(ctx, sc); err != nil {
		if t.Type() == topic.RangeMerge {
			return fmt.Errorf("%w (a range-merge topic takes no schedule)", err)
		}
		return err
	}
	info, err := s.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, scheduleToJSON(info, false))
	}
	if info.Paused {
		fmt.Fprintf(a.stdout, "set %s (paused)\n", info.Name)
	} else {
		fmt.Fprintf(a.stdout, "set %s: next tick %s\n", info.Name, fmtTime(info.Next))
	}
	return nil
}

func (a *app) schedulesRemove(args []string) error { return a.scheduleOp("remove", args) }
func (a *app) schedulesPause(args []string) error  { return a.scheduleOp("pause", args) }
func (a *app) schedulesResume(args []string) error { return a.scheduleOp("resume", args) }

// scheduleOp runs remove, pause or resume on one schedule.
func (a *app) scheduleOp(op string, args []string) error {
	return a.onSchedule("schedules "+op, args, func(ctx context.Context, s *rmq.Schedules, name string) error {
		return a.scheduleDo(ctx, s, op, name)
	})
}

func (a *app) scheduleDo(ctx context.Context, s *rmq.Schedules, op, name string) error {
	var err error
	switch op {
	case "remove":
		err = s.Remove(ctx, name)
	case "pause":
		err = s.Pause(ctx, name)
	default:
		err = s.Resume(ctx, name)
	}
	if err != nil {
		return a.notFound(name, err)
	}
	past := map[string]string{"remove": "removed", "pause": "paused", "resume": "resumed"}[op]
	if a.output == "json" {
		return writeJSON(a.stdout, map[string]any{"name": name, past: true})
	}
	fmt.Fprintf(a.stdout, "%s %s\n", past, name)
	return nil
}

func (a *app) schedulesTrigger(args []string) error {
	return a.onSchedule("schedules trigger", args, func(ctx context.Context, s *rmq.Schedules, name string) error {
		id, err := s.Trigger(ctx, name)
		if err != nil {
			return a.notFound(name, err)
		}
		if a.output == "json" {
			return writeJSON(a.stdout, map[string]any{"name": name, "id": id})
		}
		fmt.Fprintf(a.stdout, "triggered %s: message %s\n", name, id)
		return nil
	})
}

// onSchedule parses the one NAME argument of command cmd and runs fn on
// that schedule with the schedules and a context bounded by --timeout.
func (a *app) onSchedule(cmd string, args []string, fn func(ctx context.Context, s *rmq.Schedules, name string) error) error {
	c := find(cmd)
	pos, err := a.parseArgs(c, c.flags(), args, "NAME")
	if err != nil {
		return err
	}
	s, cancel, err := a.schedules()
	if err != nil {
		return err
	}
	defer cancel()
	ctx, done := a.context()
	defer done()
	return fn(ctx, s, pos[0])
}
