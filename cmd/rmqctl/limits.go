package main

import (
	"fmt"
	"strings"

	"github.com/rmq-go/rmq/rmq"
)

const limitsHelp = `Usage:
  rmqctl limits TOPIC                 show the topic's flow limits
  rmqctl limits TOPIC set LIMITS      store new limits
  rmqctl limits TOPIC clear           remove them

A topic's flow limits hold across every process that consumes it; they are
stored with the topic, and running consumers obey new ones at their next
fetch. LIMITS is one argument of space-separated fields, any of:
  rate=N/PERIOD     at most N deliveries start per PERIOD (a Go duration,
                    1ms..24h), topic-wide, plus a burst of N/10 after a pause
  conc=N            at most N deliveries in flight at once, topic-wide
  gconc=N           at most N deliveries of one group in flight at once
  grate=N/PERIOD    at most N deliveries of one group start per PERIOD
For example: rmqctl limits orders set 'rate=100/1s conc=20 gconc=1'
`

// limits shows, sets or clears a topic's flow limits.
func (a *app) limits(args []string) error {
	c := find("limits")
	pos, err := a.parseFlags(c, c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef(c.name, "limits: missing TOPIC")
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	rest := pos[1:]
	switch {
	case len(rest) == 0:
	case rest[0] == "clear" && len(rest) == 1:
		if err := a.insp.SetLimits(ctx, t, rmq.Limits{}); err != nil {
			return err
		}
	case rest[0] == "set" && len(rest) == 2:
		l, err := rmq.ParseLimits(rest[1])
		if err != nil {
			return usagef("limits", "%v", err)
		}
		if err := a.insp.SetLimits(ctx, t, l); err != nil {
			return err
		}
	default:
		return usagef("limits", "limits: want 'set LIMITS' or 'clear' after the topic, got %q", strings.Join(rest, " "))
	}
	l, err := a.insp.Limits(ctx, t)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, map[string]any{"topic": t.Name(), "limits": l.String()})
	}
	s := l.String()
	if s == "" {
		s = "none"
	}
	fmt.Fprintf(a.stdout, "%s: %s\n", t.Name(), s)
	return nil
}

// adaptiveCell shows the clients' adaptive limits of a topic.
func adaptiveCell(as []rmq.AdaptiveLimit) string {
	var parts []string
	for _, x := range as {
		parts = append(parts, fmt.Sprintf("%s %d (%d..%d)", x.Client, x.Limit, x.Min, x.Max))
	}
	return strings.Join(parts, ", ")
}
