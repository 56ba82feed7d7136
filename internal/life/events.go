// Package life reads what the scripts record of a message's life after
// hand-off (luascripts/lifelib.lua): a topic's event log, one stream per
// slot in the slot's hash tag, followed as one sequence of events.
package life

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is one recorded transition of a message.
type Event struct {
	Cursor    string // where to resume right after this event
	Type      string // completed, retried, dead, ...
	MessageID string
	Attempt   int
	Time      time.Time // Redis's clock when the transition happened
	Data      []byte
}

// ErrInvalidCursor is returned for an after that no Event's Cursor gave
// (or one of another topic: another number of slots).
var ErrInvalidCursor = errors.New("rmq: invalid event cursor")

// readCount bounds the entries one read takes from a stream.
const readCount = 256

// Follow yields the events recorded in streams (a topic's per-slot logs,
// by slot index) after the position after names: "" only events recorded
// from now on, "0" from the oldest kept, else an Event's Cursor. It blocks
// for new events without polling (a blocking read per node: every stream
// on a single node, one per stream on a cluster, whose slots lie in
// different hash slots), and goes on after Redis restarts or fails over,
// from the last position it yielded. It ends when ctx ends (with ctx's
// error) or the caller stops ranging. Events of one slot, hence of one
// message, come in the order they were recorded.
func Follow(ctx context.Context, rdb redis.UniversalClient, streams []string, after string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		pos, err := parseCursor(after, len(streams))
		if err != nil {
			yield(Event{}, err)
			return
		}
		if after == "" {
			if pos, err = lastIDs(ctx, rdb, streams); err != nil {
				yield(Event{}, err)
				return
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		f := &follower{rdb: rdb, streams: streams, out: make(chan batch)}
		defer f.wg.Wait()
		defer cancel()
		f.start(ctx, pos)
		for {
			var b batch
			select {
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			case b = <-f.out:
			}
			for _, m := range b.msgs {
				pos[b.slot] = m.ID
				ev, err := decode(m)
				if err != nil {
					continue // not an entry of ours: skip it, keep the position
				}
				ev.Cursor = formatCursor(pos)
				if !yield(ev, nil) {
					return
				}
			}
			close(b.done)
		}
	}
}

// batch is one read's entries of one slot's stream; the reader waits for
// done before it reads on, so positions advance in order.
type batch struct {
	slot int
	msgs []redis.XMessage
	done chan struct{}
}

// follower owns the blocking readers of one Follow.
type follower struct {
	rdb     redis.UniversalClient
	streams []string
	out     chan batch
	wg      sync.WaitGroup
}

// start runs the readers: one for every stream on a single node, one per
// stream on a cluster.
func (f *follower) start(ctx context.Context, pos []string) {
	if cc, ok := f.rdb.(*redis.ClusterClient); ok {
		for i := range f.streams {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.read(ctx, func(ctx context.Context) (*redis.Client, error) {
					return cc.MasterForKey(ctx, f.streams[i])
				}, []int{i}, []string{pos[i]})
			}()
		}
		return
	}
	all := make([]int, len(f.streams))
	for i := range all {
		all[i] = i
	}
	node := func(context.Context) (*redis.Client, error) {
		if c, ok := f.rdb.(*redis.Client); ok {
			return c, nil
		}
		return nil, fmt.Errorf("rmq: events: unsupported client %T", f.rdb)
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.read(ctx, node, all, append([]string(nil), pos...))
	}()
}

// read follows the streams of slots from their positions on a connection
// of its own, which it closes when ctx ends so that a blocking read
// returns at once. A failed read (Redis restarting, a failover) is tried
// again on a new connection after a pause, from the same positions.
func (f *follower) read(ctx context.Context, node func(context.Context) (*redis.Client, error), slots []int, pos []string) {
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := f.readOn(ctx, node, slots, pos)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			pause = 50 * time.Millisecond
			continue
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// readOn reads on one connection of its own until a read fails or ctx
// ends. Its reads block in Redis without a timeout; when ctx ends, CLIENT
// UNBLOCK ends the read under way (go-redis cannot abandon a read), tried
// again until the reader has left, since ctx may end between the check
// and the next read.
func (f *follower) readOn(ctx context.Context, node func(context.Context) (*redis.Client, error), slots []int, pos []string) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	// One command through c's own pool first: go-redis's connection setup
	// may switch c's options (its maintenance-notification handshake falls
	// back on a Redis that lacks it), and a Conn made from c reads those
	// options under a lock of its own, so it must come after the switch.
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	conn := c.Conn()
	defer conn.Close()
	id, err := conn.ClientID(ctx).Result()
	if err != nil {
		return err
	}
	left, unblocked := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(unblocked)
		for {
			uctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.ClientUnblock(uctx, id)
			cancel()
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-left:
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
	defer func() {
		close(left)
		if !stop() {
			<-unblocked
		}
	}()
	args := make([]string, 0, 2*len(slots))
	for ctx.Err() == nil {
		args = args[:0]
		for _, s := range slots {
			args = append(args, f.streams[s])
		}
		args = append(args, pos...)
		res, err := conn.XRead(ctx, &redis.XReadArgs{Streams: args, Count: readCount, Block: 0}).Result()
		if err != nil {
			return err
		}
		for _, st := range res {
			at := indexOf(f.streams, slots, st.Stream)
			if at < 0 || len(st.Messages) == 0 {
				continue
			}
			b := batch{slot: slots[at], msgs: st.Messages, done: make(chan struct{})}
			select {
			case f.out <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-b.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			pos[at] = st.Messages[len(st.Messages)-1].ID
		}
	}
	return ctx.Err()
}

func indexOf(streams []string, slots []int, key string) int {
	for i, s := range slots {
		if streams[s] == key {
			return i
		}
	}
	return -1
}

// lastIDs returns each stream's last entry id ("0-0" for an empty one).
func lastIDs(ctx context.Context, rdb redis.UniversalClient, streams []string) ([]string, error) {
	cmds := make([]*redis.XMessageSliceCmd, len(streams))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range streams {
			cmds[i] = p.XRevRangeN(ctx, s, "+", "-", 1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("rmq: events: read the logs' ends: %w", err)
	}
	out := make([]string, len(streams))
	for i, c := range cmds {
		out[i] = "0-0"
		if ms := c.Val(); len(ms) > 0 {
			out[i] = ms[0].ID
		}
	}
	return out, nil
}

// decode reads one stream entry written by lifelib.lua's life_event.
func decode(m redis.XMessage) (Event, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	ev := Event{Type: str("t"), MessageID: str("id")}
	if ev.Type == "" || ev.MessageID == "" {
		return Event{}, fmt.Errorf("rmq: events: entry %s is no event", m.ID)
	}
	ev.Attempt, _ = strconv.Atoi(str("a"))
	if d := str("d"); d != "" {
		ev.Data = []byte(d)
	}
	ms, _, _ := strings.Cut(m.ID, "-")
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
		ev.Time = time.UnixMilli(n)
	}
	return ev, nil
}

// A cursor is "e1" then, for each slot whose position is not "0-0", its
// index and its stream entry id: "e1 3=1733580000000-0 7=...". A cursor
// names every slot's position, so resuming after it yields each event
// once whichever slot it came from.
const cursorTag = "e1"

func formatCursor(pos []string) string {
	var b strings.Builder
	b.WriteString(cursorTag)
	for i, p := range pos {
		if p == "0-0" || p == "0" {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('=')
		b.WriteString(p)
	}
	return b.String()
}

func parseCursor(s string, n int) ([]string, error) {
	pos := make([]string, n)
	for i := range pos {
		pos[i] = "0-0"
	}
	if s == "" || s == "0" {
		return pos, nil
	}
	f := strings.Fields(s)
	if len(f) == 0 || f[0] != cursorTag {
		return nil, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	seen := map[int]bool{}
	for _, part := range f[1:] {
		is, id, ok := strings.Cut(part, "=")
		i, err := strconv.Atoi(is)
		if !ok || err != nil || i < 0 || i >= n || seen[i] || !validID(id) {
			return nil, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
		}
		seen[i] = true
		pos[i] = id
	}
	return pos, nil
}

// validID reports whether id is a stream entry id "ms-seq".
func validID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}
