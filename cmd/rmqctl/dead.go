package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

func (a *app) deadList(args []string) error {
	c := find("dead list")
	fs := c.flags()
	limit := fs.Int("limit", defaultLimit, "")
	cursor := fs.String("cursor", "", "")
	pos, err := a.parseArgs(c, fs, args, "TOPIC")
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > rmq.MaxListLimit {
		return usagef(c.name, "dead list: --limit %d: want 1..%d", *limit, rmq.MaxListLimit)
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	ms, err := a.insp.Dead(ctx, t, rmq.WithLimit(*limit), rmq.WithCursor(*cursor))
	if errors.Is(err, rmq.ErrInvalidCursor) {
		return usagef(c.name, "dead list: --cursor: not a cursor of %s", t.Name())
	}
	if err != nil {
		return err
	}
	next := ""
	if len(ms) == *limit {
		next = ms[len(ms)-1].Cursor()
	}
	if a.output == "json" {
		page := deadPageJSON{Messages: []deadJSON{}, NextCursor: next}
		for _, m := range ms {
			page.Messages = append(page.Messages, deadToJSON(m))
		}
		return writeJSON(a.stdout, page)
	}
	tb := newTable(a.stdout, "ID", "SLOT", "ATTEMPTS", "DIED", "FIRST-SENT", "LAST-ERROR", "BODY")
	for _, m := range ms {
		tb.row(cell(m.ID, 40), strconv.Itoa(m.Slot), strconv.Itoa(m.Attempts), fmtTime(m.DiedAt),
			cellTime(m.FirstSentAt), cell(m.LastError, 40), bodyCell(m.Body, 60))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(a.stdout, "\nnext page: --cursor %s\n", next)
	}
	return nil
}

func (a *app) deadShow(args []string) error {
	ctx, cancel, t, id, err := a.topicAndID("dead show", args)
	defer cancel()
	if err != nil {
		return err
	}
	m, err := a.insp.DeadMessage(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return fmt.Errorf("no dead message %q in %s: not found", id, t.Name())
	}
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, deadToJSON(m))
	}
	tb := newTable(a.stdout, "id:", m.ID)
	tb.row("topic:", describe(t))
	tb.row("slot:", strconv.Itoa(m.Slot))
	tb.row("attempts:", strconv.Itoa(m.Attempts))
	tb.row("last error:", cell(m.LastError, 4096))
	tb.row("first sent:", cellTime(m.FirstSentAt))
	tb.row("died:", fmtTime(m.DiedAt))
	if t.Type().TimeBased() {
		tb.row("due:", cellTime(m.DueAt))
	} else {
		tb.row("priority:", strconv.FormatInt(m.Priority, 10))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	body, enc := encodeBody(m.Body)
	fmt.Fprintf(a.stdout, "body (%s, %d bytes):\n%s\n", enc, len(m.Body), body)
	return nil
}

// batch holds what dead requeue and dead delete share: the ids, or --all.
type batch struct {
	t   topic.Topic
	ids []string
	all bool
}

// parseBatch parses "TOPIC (ID...|--all) [--yes]" and asks for
// confirmation when more than one message is concerned.
func (a *app) parseBatch(ctx context.Context, c *command, verb string, args []string) (*batch, error) {
	fs := c.flags()
	all := fs.Bool("all", false, "")
	yes := fs.Bool("yes", false, "")
	fs.BoolVar(yes, "y", false, "")
	pos, err := a.parseFlags(c, fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) == 0 {
		return nil, usagef(c.name, "%s: missing TOPIC", c.name)
	}
	ids := pos[1:]
	switch {
	case *all && len(ids) > 0:
		return nil, usagef(c.name, "%s: give ids or --all, not both", c.name)
	case !*all && len(ids) == 0:
		return nil, usagef(c.name, "%s: give the ids of the messages, or --all", c.name)
	}
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return nil, err
	}
	b := &batch{t: t, ids: ids, all: *all}
	if *yes {
		return b, nil
	}
	var question string
	if b.all {
		st, err := a.insp.Stats(ctx, t)
		if err != nil {
			return nil, err
		}
		if st.Dead <= 1 {
			return b, nil
		}
		question = fmt.Sprintf("%s all %d dead messages of %s?", verb, st.Dead, t.Name())
	} else {
		if len(ids) <= 1 {
			return b, nil
		}
		question = fmt.Sprintf("%s %d dead messages of %s?", verb, len(ids), t.Name())
	}
	if !a.confirm(question) {
		return nil, errors.New("aborted: nothing changed (--yes skips the question)")
	}
	return b, nil
}

func (a *app) deadRequeue(args []string) error {
	return a.deadBatch(args, "dead requeue", "Requeue", "requeued", (*rmq.Inspector).RequeueAll, (*rmq.Inspector).Requeue)
}

func (a *app) deadDelete(args []string) error {
	return a.deadBatch(args, "dead delete", "Delete", "deleted", (*rmq.Inspector).PurgeDead, (*rmq.Inspector).DeleteDead)
}

// deadBatch runs a dead-queue command on the messages parseBatch selected:
// all of them with all, the ids named with some. They are method
// expressions: the Inspector exists only once parseBatch connected.
func (a *app) deadBatch(args []string, name, question, verb string,
	all func(*rmq.Inspector, context.Context, topic.Topic) (int, error),
	some func(*rmq.Inspector, context.Context, topic.Topic, ...string) (int, error)) error {
	ctx, cancel := a.context()
	defer cancel()
	b, err := a.parseBatch(ctx, find(name), question, args)
	if err != nil {
		return err
	}
	var n int
	if b.all {
		n, err = all(a.insp, ctx, b.t)
	} else {
		n, err = some(a.insp, ctx, b.t, b.ids...)
	}
	if err != nil {
		return err
	}
	return a.reportCount(b, n, verb)
}

// reportCount prints how many messages a batch changed. Naming ids that
// are not dead is an error (exit 1) after the others were done.
func (a *app) reportCount(b *batch, n int, verb string) error {
	requested := len(uniq(b.ids))
	if b.all {
		requested = -1
	}
	if a.output == "json" {
		out := countJSON{Topic: b.t.Name(), Requested: requested}
		if verb == "requeued" {
			out.Requeued = &n
		} else {
			out.Deleted = &n
		}
		if err := writeJSON(a.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "%s %d dead message%s of %s\n", verb, n, plural(n), b.t.Name())
	}
	if !b.all && n < requested {
		return fmt.Errorf("%d of the %d ids named were not in the dead queue of %s", requested-n, requested, b.t.Name())
	}
	return nil
}

// uniq counts ids as the Inspector does: empty ones and repeats dropped.
func uniq(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
