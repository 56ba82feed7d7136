package flowtree

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Keep is how long a parent's record stays after the parent left it
// (released into store, or failed): its children's outcomes stay
// readable (consumer.Message.Children, rmq.Inspector.Flow) while it runs
// and for a while after.
const Keep = 7 * 24 * time.Hour

// maxDepth bounds how far a failure is reported up a tree (producer's
// depth limit).
const maxDepth = 64

// Reporter reports children's outcomes to their parents' records and
// reconciles the ones nobody reported. It is safe for concurrent use.
type Reporter struct {
	rdb     redis.UniversalClient
	prefix  string
	wakeCmd string

	mu     sync.Mutex
	events map[string]eventsLen // by topic name
	// Observe, when set, hears of every parent released (failed: false)
	// or failed by a child.
	Observe func(topicName string, failed bool)
}

type eventsLen struct {
	n    int
	read time.Time
}

// NewReporter returns a Reporter for the keys under prefix.
func NewReporter(rdb redis.UniversalClient, prefix string) *Reporter {
	return &Reporter{rdb: rdb, prefix: prefix, wakeCmd: scripts.WakeCommand(rdb), events: map[string]eventsLen{}}
}

// eventsOf returns the event log length of the topic named name, read at
// most every few seconds.
func (r *Reporter) eventsOf(ctx context.Context, name string) int {
	r.mu.Lock()
	e, ok := r.events[name]
	r.mu.Unlock()
	if ok && time.Since(e.read) < 5*time.Second {
		return e.n
	}
	s, _, err := life.Read(ctx, r.rdb, r.prefix, name)
	if err != nil {
		return e.n
	}
	r.mu.Lock()
	r.events[name] = eventsLen{n: s.Events, read: time.Now()}
	r.mu.Unlock()
	return s.Events
}

// Report records a child's final outcome (state c, d, x or r) in the
// record ref names; a failure that fails the parent is reported on up the
// tree. It returns once every record it changed is written; a second
// report of the same child changes nothing (flowrec.lua).
func (r *Reporter) Report(ctx context.Context, ref Ref, state byte, errText string, result []byte) error {
	return r.report(ctx, ref, state, errText, result, 0)
}

func (r *Reporter) report(ctx context.Context, ref Ref, state byte, errText string, result []byte, depth int) error {
	k := keyspace.SlotKeysFor(r.prefix, ref.Topic, ref.Slot)
	lk := keyspace.LifeKeysFor(r.prefix, ref.Topic, ref.Slot)
	tk := keyspace.TreeKeysFor(r.prefix, ref.Topic, ref.Slot)
	gk := keyspace.GroupKeysForName(r.prefix, ref.Topic, ref.Slot)
	keys := []string{keyspace.TreeRecordKey(r.prefix, ref.Topic, ref.Slot, ref.ID), k.Store, k.Msg, k.Wake, k.Delayed, k.Dead, k.DeadMsg, lk.Events, tk.Up, gk.Queue, gk.Turn}
	args := []any{r.wakeCmd, r.eventsOf(ctx, ref.Topic), Keep.Milliseconds(), ref.Index, string(state), errText, result}
	res, err := scripts.FlowRec.Run(ctx, r.rdb, keys, args...).Slice()
	if err != nil {
		return fmt.Errorf("rmq: report a flow child to %s/%s: %w", ref.Topic, ref.ID, err)
	}
	code, _ := res[0].(int64)
	if code == 1 && r.Observe != nil {
		r.Observe(ref.Topic, false)
	}
	if code != 2 {
		return nil
	}
	if r.Observe != nil {
		r.Observe(ref.Topic, true)
	}
	up, _ := res[1].(string)
	msg, _ := res[2].(string)
	next, ok := ParseRef(up)
	if !ok || depth >= maxDepth {
		return nil // a root: nothing above it
	}
	// The failed parent's outcome goes up first, then its watch entry
	// goes: a crash between the two leaves the entry, and the reconciler
	// finds the parent in its dead queue and reports it again.
	if err := r.report(ctx, next, 'd', msg, nil, depth+1); err != nil {
		return err
	}
	return r.Forget(ctx, ref.Topic, ref.Slot, ref.ID)
}

// Forget clears child id of slot of the topic named topicName from its
// slot's watch list, once its outcome is recorded.
func (r *Reporter) Forget(ctx context.Context, topicName string, slot int, id string) error {
	if err := r.rdb.HDel(ctx, keyspace.TreeKeysFor(r.prefix, topicName, slot).Up, id).Err(); err != nil {
		return fmt.Errorf("rmq: clear the flow watch of %s/%s: %w", topicName, id, err)
	}
	return nil
}

// checkKeys are flowcheck.lua's keys for slot of the topic named name.
func (r *Reporter) checkKeys(name string, slot int) []string {
	k := keyspace.SlotKeysFor(r.prefix, name, slot)
	tk := keyspace.TreeKeysFor(r.prefix, name, slot)
	return []string{tk.Up, k.Msg, k.Dead, k.DeadMsg, keyspace.LifeKeysFor(r.prefix, name, slot).Done, tk.StageQ, tk.Staged}
}

// Check reports the outcomes of those of ids (children of slot of the
// topic named name) that ended without a report: dead, removed,
// cancelled, expired. A process that saw such an end calls it at once;
// Scan finds the rest.
func (r *Reporter) Check(ctx context.Context, name string, slot int, ids ...string) error {
	args := []any{"i"}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := scripts.FlowCheck.Run(ctx, r.rdb, r.checkKeys(name, slot), args...).Slice()
	if err != nil {
		return fmt.Errorf("rmq: check flow children of %s slot %d: %w", name, slot, err)
	}
	_, err = r.settle(ctx, name, slot, res)
	return err
}

// scanCount is how many watch entries and staged nodes one Scan call
// looks at.
const scanCount = 256

// StageGrace is how long a staged node may wait for its SendFlow to
// activate it before a scan finishes the flow's work: activates it when
// the flow was committed, discards it when the flow never will be.
const StageGrace = 30 * time.Second

// Scan looks at up to scanCount watched children of slot of the topic
// named name from cursor on, reports the outcomes nobody reported, and
// finishes the flows whose SendFlow died between staging and activation.
// It returns the cursor to go on from ("0": a round is complete).
func (r *Reporter) Scan(ctx context.Context, name string, slot int, cursor string) (string, error) {
	t, err := r.rdb.Time(ctx).Result()
	if err != nil {
		return cursor, err
	}
	before := t.Add(-StageGrace).UnixMilli()
	res, err := scripts.FlowCheck.Run(ctx, r.rdb, r.checkKeys(name, slot), "s", cursor, scanCount, before).Slice()
	if err != nil {
		return cursor, fmt.Errorf("rmq: scan flow children of %s slot %d: %w", name, slot, err)
	}
	next, _ := res[0].(string)
	rest, err := r.settle(ctx, name, slot, res)
	if err != nil {
		return cursor, err
	}
	// Staged nodes left behind: pairs of member and "<fid>\n<root ref>".
	byFlow := map[string][]string{}
	roots := map[string]string{}
	for j := 0; j+1 < len(rest); j += 2 {
		m, _ := rest[j].(string)
		v, _ := rest[j+1].(string)
		fid, root, _ := strings.Cut(v, "\n")
		byFlow[fid] = append(byFlow[fid], m)
		roots[fid] = root
	}
	for fid, ms := range byFlow {
		rs, rt, rid, ok := parseRoot(roots[fid])
		if !ok {
			continue
		}
		committed, err := Committed(ctx, r.rdb, r.prefix, rt, rs, rid, fid)
		if err != nil {
			return cursor, err
		}
		mode := "x"
		if committed {
			mode = "a"
		} else if ms, err = r.olderThan(ctx, name, slot, ms, t.Add(-discardAfter)); err != nil {
			return cursor, err
		}
		if err := Act(ctx, r.rdb, r.prefix, r.wakeCmd, name, slot, mode, fid, ms); err != nil {
			return cursor, err
		}
	}
	return next, nil
}

// discardAfter is how old a staged node of a flow that is not committed
// must be before a scan discards it: several StageGraces, so no writer
// can still commit it (Write gives up on a flow whose staging took longer
// than StageGrace).
const discardAfter = 5 * StageGrace

// olderThan returns those of the staged members ms of slot staged before
// at.
func (r *Reporter) olderThan(ctx context.Context, name string, slot int, ms []string, at time.Time) ([]string, error) {
	scores, err := r.rdb.ZMScore(ctx, keyspace.TreeKeysFor(r.prefix, name, slot).StageQ, ms...).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: read staged flow nodes of %s slot %d: %w", name, slot, err)
	}
	var out []string
	for i, sc := range scores {
		if sc > 0 && int64(sc) < at.UnixMilli() {
			out = append(out, ms[i])
		}
	}
	return out, nil
}

// settle reports the outcomes of a flowcheck.lua reply and returns what
// follows them.
func (r *Reporter) settle(ctx context.Context, name string, slot int, res []any) ([]any, error) {
	n, _ := res[1].(int64)
	at := 2
	for range n {
		id, _ := res[at].(string)
		up, _ := res[at+1].(string)
		st, _ := res[at+2].(string)
		msg, _ := res[at+3].(string)
		at += 4
		ref, ok := ParseRef(strings.TrimPrefix(up, "p"))
		if ok && st != "" {
			if err := r.Report(ctx, ref, st[0], msg, nil); err != nil {
				return nil, err
			}
		}
		if err := r.Forget(ctx, name, slot, id); err != nil {
			return nil, err
		}
	}
	return res[at:], nil
}

// rootRef is the root's ref in a staged entry: "<slot>\n<topic>\n<id>".
func rootRef(topicName string, slot int, id string) string {
	return strconv.Itoa(slot) + "\n" + topicName + "\n" + id
}

func parseRoot(s string) (slot int, topicName, id string, ok bool) {
	sl, rest, ok1 := strings.Cut(s, "\n")
	t, id, ok2 := strings.Cut(rest, "\n")
	n, err := strconv.Atoi(sl)
	return n, t, id, ok1 && ok2 && err == nil
}

// Watched returns the parent Ref of child id of slot of the topic named
// name while its outcome has not reached the parent (its watch entry).
func (r *Reporter) Watched(ctx context.Context, name string, slot int, id string) (Ref, bool, error) {
	up, err := r.rdb.HGet(ctx, keyspace.TreeKeysFor(r.prefix, name, slot).Up, id).Result()
	if errors.Is(err, redis.Nil) {
		return Ref{}, false, nil
	}
	if err != nil {
		return Ref{}, false, fmt.Errorf("rmq: read the flow watch of %s/%s: %w", name, id, err)
	}
	ref, ok := ParseRef(strings.TrimPrefix(up, "p"))
	return ref, ok, nil
}

// Ended reports the end of child id of slot of the topic named name that
// a call just made (state x cancelled, r removed), if it is a flow child
// whose outcome is not recorded yet. A crash before it leaves the watch
// entry, and a scan reports the end.
func (r *Reporter) Ended(ctx context.Context, name string, slot int, id string, state byte) error {
	ref, ok, err := r.Watched(ctx, name, slot, id)
	if err != nil || !ok {
		return err
	}
	if err := r.Report(ctx, ref, state, "", nil); err != nil {
		return err
	}
	return r.Forget(ctx, name, slot, id)
}
