package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/rmq"
)

// defaultLimit is the page size of dead list and peek: a terminal's worth.
const defaultLimit = 20

func (a *app) topics(args []string) error {
	c := find("topics")
	if _, err := a.parseArgs(c, c.flags(), args); err != nil {
		return err
	}
	ctx, cancel := a.context()
	defer cancel()
	if err := a.connect(ctx); err != nil {
		return err
	}
	ts, err := a.insp.Topics(ctx)
	if err != nil {
		return err
	}
	out := []topicJSON{}
	for _, t := range ts {
		st, err := a.insp.Stats(ctx, t)
		if err != nil {
			return err
		}
		out = append(out, topicJSON{Name: t.Name(), Type: t.Type().String(), Slots: t.SlotAmount(),
			Waiting: st.Store, InFlight: st.Prepare, Dead: st.Dead})
	}
	if a.output == "json" {
		return writeJSON(a.stdout, out)
	}
	tb := newTable(a.stdout, "TOPIC", "TYPE", "SLOTS", "WAITING", "IN-FLIGHT", "DEAD")
	for _, t := range out {
		tb.row(t.Name, t.Type, strconv.Itoa(t.Slots), itoa(t.Waiting), itoa(t.InFlight), itoa(t.Dead))
	}
	return tb.flush()
}

func (a *app) stats(args []string) error {
	c := find("stats")
	fs := c.flags()
	perSlot := fs.Bool("slots", false, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	st, err := a.insp.Stats(ctx, t)
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, statsToJSON(st))
	}
	tb := newTable(a.stdout, "topic:", describe(t))
	tb.row("waiting:", fmt.Sprintf("%d (%d due now)", st.Store, st.Due))
	tb.row("in flight:", itoa(st.Prepare))
	tb.row("dead:", itoa(st.Dead))
	if st.Delayed > 0 {
		tb.row("delayed:", itoa(st.Delayed))
	}
	if st.Paused {
		tb.row("paused:", "yes")
	}
	if !st.Limits.IsZero() {
		tb.row("limits:", st.Limits.String())
	}
	if st.Grouped > 0 || st.Groups > 0 {
		tb.row("in groups:", fmt.Sprintf("%d waiting in %d groups", st.Grouped, st.Groups))
	}
	if len(st.Adaptive) > 0 {
		tb.row("adaptive:", adaptiveCell(st.Adaptive))
	}
	lifeRows(tb, st)
	if t.Type().TimeBased() {
		next := "-"
		if !st.NextDue.IsZero() {
			next = fmtTime(st.NextDue)
			if lag := st.Lag(); lag > 0 {
				next += fmt.Sprintf(" (overdue by %s)", lag.Round(time.Millisecond))
			}
		}
		tb.row("next due:", next)
	} else {
		top := "-"
		if st.Store > 0 {
			top = itoa(st.TopPriority)
		}
		tb.row("top priority:", top)
	}
	tb.row("oldest death:", cellTime(st.OldestDeath))
	tb.row("newest death:", cellTime(st.NewestDeath))
	tb.row("taken at:", fmtTime(st.Now))
	if err := tb.flush(); err != nil {
		return err
	}
	if !*perSlot {
		return nil
	}
	fmt.Fprintln(a.stdout)
	head := "NEXT-DUE"
	if !t.Type().TimeBased() {
		head = "TOP-PRIORITY"
	}
	tb = newTable(a.stdout, "SLOT", "WAITING", "DUE", "IN-FLIGHT", "DEAD", head)
	for _, s := range st.Slots {
		if s.Store+s.Prepare+s.Dead == 0 {
			continue
		}
		h := cellTime(s.NextDue)
		if !t.Type().TimeBased() {
			h = "-"
			if s.Store > 0 {
				h = itoa(s.TopPriority)
			}
		}
		tb.row(strconv.Itoa(s.Slot), itoa(s.Store), itoa(s.Due), itoa(s.Prepare), itoa(s.Dead), h)
	}
	return tb.flush()
}

func (a *app) peek(args []string) error {
	c := find("peek")
	fs := c.flags()
	limit := fs.Int("limit", defaultLimit, "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > rmq.MaxListLimit {
		return usagef(c.name, "peek: --limit %d: want 1..%d", *limit, rmq.MaxListLimit)
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	ms, err := a.insp.Peek(ctx, t, *limit)
	if err != nil {
		return err
	}
	if a.output == "json" {
		out := []waitingJSON{}
		for _, m := range ms {
			out = append(out, waitingToJSON(m))
		}
		return writeJSON(a.stdout, out)
	}
	when := "DUE"
	if !t.Type().TimeBased() {
		when = "PRIORITY"
	}
	tb := newTable(a.stdout, "ID", "SLOT", when, "ATTEMPTS", "IN-FLIGHT", "LAST-ERROR", "BODY")
	for _, m := range ms {
		w := fmtTime(m.DueAt)
		if !t.Type().TimeBased() {
			w = strconv.FormatFloat(m.Score, 'f', -1, 64)
			if m.Score <= 16 {
				w += " (retry)"
			}
		}
		inflight := "-"
		if m.InFlight {
			inflight = "yes"
		}
		tb.row(cell(m.ID, 40), strconv.Itoa(m.Slot), w, strconv.Itoa(m.Attempts), inflight, cell(m.LastError, 40), bodyCell(m.Body, 60))
	}
	return tb.flush()
}

func (a *app) remove(args []string) error {
	ctx, cancel, t, id, err := a.topicAndID("remove", args)
	defer cancel()
	if err != nil {
		return err
	}
	removed, err := a.insp.Remove(ctx, t, id)
	if err != nil {
		return err
	}
	if a.output == "json" {
		if err := writeJSON(a.stdout, removeJSON{Topic: t.Name(), ID: id, Removed: removed}); err != nil {
			return err
		}
	} else if removed {
		fmt.Fprintf(a.stdout, "removed %s from %s\n", id, t.Name())
	}
	if !removed {
		return fmt.Errorf("no waiting message %q in %s", id, t.Name())
	}
	return nil
}

// lifeRows adds what a topic keeps of finished messages to stats, when it
// keeps any.
func lifeRows(tb *table, st rmq.Stats) {
	if st.Retained > 0 {
		tb.row("retained:", fmt.Sprintf("%d finished (completed or cancelled)", st.Retained))
	}
	if st.Events > 0 {
		tb.row("event log:", fmt.Sprintf("%d events", st.Events))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
