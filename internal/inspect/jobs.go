package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// Pause and resume payloads on a slot's wake channel. A consumer that does
// not know them reads them as "look at the slot", which is harmless.
const (
	wakePause  = "p"
	wakeResume = "r"
)

// Pause is the work of rmq.Inspector.Pause, whose doc says what it does.
func (i *Inspector) Pause(ctx context.Context, t topic.Topic) error {
	return i.setPaused(ctx, t, true)
}

// Resume is the work of rmq.Inspector.Resume, whose doc says what it does.
func (i *Inspector) Resume(ctx context.Context, t topic.Topic) error {
	return i.setPaused(ctx, t, false)
}

func (i *Inspector) setPaused(ctx context.Context, t topic.Topic, paused bool) error {
	if err := i.check(ctx, t); err != nil {
		return err
	}
	var err error
	if paused {
		now, terr := i.rdb.Time(ctx).Result()
		if terr != nil {
			return fmt.Errorf("rmq: pause %s: %w", t.Name(), terr)
		}
		err = i.rdb.HSet(ctx, keyspace.PausedKey(i.prefix), t.Name(), now.UnixMilli()).Err()
	} else {
		err = i.rdb.HDel(ctx, keyspace.PausedKey(i.prefix), t.Name()).Err()
	}
	if err != nil {
		return fmt.Errorf("rmq: pause %s: %w", t.Name(), err)
	}
	payload := wakeResume
	if paused {
		payload = wakePause
	}
	// The stored state comes first: a consumer that (re)subscribes reads
	// it, one already subscribed hears the message.
	return i.tellSlots(ctx, t, payload)
}

// tellSlots publishes payload on every slot's wake-up channel of t, one
// pipeline, for the consumers of t to act on (pause, resume, new limits).
func (i *Inspector) tellSlots(ctx context.Context, t topic.Topic, payload string) error {
	err := i.pipelined(ctx, t.SlotAmount(), func(pipe redis.Pipeliner, s int) {
		ch := i.keys(t, s).Wake
		if i.wakeCmd == "SPUBLISH" {
			pipe.SPublish(ctx, ch, payload)
		} else {
			pipe.Publish(ctx, ch, payload)
		}
	})
	if err != nil {
		return fmt.Errorf("rmq: tell consumers of %s: %w", t.Name(), err)
	}
	return nil
}

// Paused is the work of rmq.Inspector.Paused, whose doc says what it does.
func (i *Inspector) Paused(ctx context.Context, t topic.Topic) (bool, error) {
	if i.err != nil {
		return false, i.err
	}
	// HGET, not HEXISTS: the least-privilege ACL (docs/operations.md)
	// allows the one and not the other.
	err := i.rdb.HGet(ctx, keyspace.PausedKey(i.prefix), t.Name()).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rmq: paused %s: %w", t.Name(), err)
	}
	return true, nil
}

// MessageState is rmq.MessageState as this package makes it; rmq converts it.
type MessageState string

// Message states.
const (
	StateWaiting  MessageState = "waiting"   // in store, or in its group's queue: due (or ranked by priority)
	StateDelayed  MessageState = "delayed"   // waiting for its time (priority)
	StateInFlight MessageState = "in_flight" // being handled under a lease
	StateDead     MessageState = "dead"      // in the dead queue
	// A topic that retains (consumer.WithRetention) keeps its finished
	// messages for a while: acked, or cancelled.
	StateCompleted MessageState = "completed"
	StateCancelled MessageState = "cancelled"
)

// MessageInfo is rmq.MessageInfo as this package makes it; rmq converts it.
type MessageInfo struct {
	ID    string
	Topic topic.Topic
	Slot  int
	State MessageState
	Body  []byte
	// Headers, MaxRetries (-1: the consumer's), ExpiresAt and Timeout are
	// the per-message options it was sent with.
	Headers    map[string]string
	MaxRetries int
	ExpiresAt  time.Time
	Timeout    time.Duration
	Attempts   int // failed attempts so far
	Snoozes    int
	// Due is when it is (or was) due: its due time for time-based types,
	// the end of its wait in the delayed set; zero for a priority message
	// that competes by priority now.
	Due         time.Time
	Priority    int64 // priority type: as sent
	FirstSentAt time.Time
	LastError   string
	LeaseUntil  time.Time // in flight: the lease's end (whole seconds)
	DiedAt      time.Time // dead: the time of death
	Group       string    // its group (producer.WithGroup); "" for none
	// Result is what the handler set (completed); Progress the latest
	// progress of the delivery in flight; FinishedAt when it completed or
	// was cancelled.
	Result     []byte
	Progress   []byte
	FinishedAt time.Time
}

// Message is the work of rmq.Inspector.Message, whose doc says what it does.
func (i *Inspector) Message(ctx context.Context, t topic.Topic, id string) (MessageInfo, error) {
	if err := i.check(ctx, t); err != nil {
		return MessageInfo{}, err
	}
	first := keyspace.IndexString(id, t.SlotAmount())
	info, err := i.messageAt(ctx, t, first, id)
	if !errors.Is(err, ErrMessageNotFound) {
		return info, err
	}
	// A body-derived id lives in its body's slot: find the slot whose
	// hashes hold it.
	var cmds [][5]*redis.FloatCmd
	var envs []*redis.BoolCmd
	var recs []*redis.IntCmd
	err = i.pipelined(ctx, t.SlotAmount(), func(pipe redis.Pipeliner, s int) {
		k := i.keys(t, s)
		cmds = append(cmds, [5]*redis.FloatCmd{pipe.ZScore(ctx, k.Store, id), pipe.ZScore(ctx, k.Delayed, id),
			pipe.ZScore(ctx, k.Prepare, id), pipe.ZScore(ctx, k.Dead, id),
			pipe.ZScore(ctx, keyspace.LifeKeysFor(i.prefix, t.Name(), s).DoneQ, id)})
		// A message waiting in its group has an envelope and is in none of
		// the others.
		envs = append(envs, pipe.HExists(ctx, k.Msg, id))
		// A flow's parent waiting for its children is only in its record.
		recs = append(recs, pipe.Exists(ctx, keyspace.TreeRecordKey(i.prefix, t.Name(), s, id)))
	})
	if err != nil {
		return MessageInfo{}, fmt.Errorf("rmq: message %s of %s: %w", id, t.Name(), err)
	}
	for s, cs := range cmds {
		for _, c := range cs {
			if s != first && c.Err() == nil {
				return i.messageAt(ctx, t, s, id)
			}
		}
		if s != first && envs[s].Val() {
			return i.messageAt(ctx, t, s, id)
		}
	}
	for s, r := range recs {
		if r.Val() == 1 {
			return i.waitingParent(ctx, t, s, id)
		}
	}
	return MessageInfo{}, fmt.Errorf("%w: %s in %s", ErrMessageNotFound, id, t.Name())
}

// waitingParent answers Message for a flow's parent whose record is in
// slot: StateWaitingChildren, with what its stored envelope tells, while
// it waits; not found once released or failed (then it is wherever its
// release or failure put it, or finished).
func (i *Inspector) waitingParent(ctx context.Context, t topic.Topic, slot int, id string) (MessageInfo, error) {
	rec, err := flowtree.Read(ctx, i.rdb, i.prefix, t.Name(), slot, id)
	switch {
	case errors.Is(err, flowtree.ErrNoRecord) || (err == nil && rec.State != flowtree.Waiting):
		return MessageInfo{}, fmt.Errorf("%w: %s in %s", ErrMessageNotFound, id, t.Name())
	case err != nil:
		return MessageInfo{}, err
	}
	info := MessageInfo{ID: id, Topic: t, Slot: slot, State: StateWaitingChildren}
	if e, err := scripts.DecodeEnvelope(rec.Env); err == nil && len(rec.Env) > 0 {
		fillFromEnvelope(&info, e)
	}
	return info, nil
}

func (i *Inspector) messageAt(ctx context.Context, t topic.Topic, slot int, id string) (MessageInfo, error) {
	k := i.keys(t, slot)
	lk := keyspace.LifeKeysFor(i.prefix, t.Name(), slot)
	pipe := i.rdb.Pipeline()
	done := pipe.HGet(ctx, lk.Done, id)
	doneUntil := pipe.ZScore(ctx, lk.DoneQ, id)
	progress := pipe.HGet(ctx, lk.Progress, id)
	now := pipe.Time(ctx)
	env := pipe.HGet(ctx, k.Msg, id)
	store := pipe.ZScore(ctx, k.Store, id)
	delayed := pipe.ZScore(ctx, k.Delayed, id)
	prepare := pipe.ZScore(ctx, k.Prepare, id)
	deadEnv := pipe.HGet(ctx, k.DeadMsg, id)
	dead := pipe.ZScore(ctx, k.Dead, id)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return MessageInfo{}, fmt.Errorf("rmq: message %s of %s: %w", id, t.Name(), err)
	}
	info := MessageInfo{ID: id, Topic: t, Slot: slot}
	raw := env.Val()
	switch {
	case env.Err() == nil && store.Err() == nil:
		info.State = StateWaiting
	case env.Err() == nil && delayed.Err() == nil:
		info.State = StateDelayed
		info.Due = time.UnixMilli(int64(delayed.Val()))
	case env.Err() == nil && prepare.Err() == nil:
		info.State = StateInFlight
		sec, token := scripts.SplitPrepareScore(prepare.Val())
		info.LeaseUntil = time.Unix(sec, 0)
		if p, ok := life.Progress(progress.Val(), token); ok {
			info.Progress = p
		}
	case deadEnv.Err() == nil && dead.Err() == nil:
		info.State = StateDead
		info.DiedAt = time.UnixMilli(int64(dead.Val()))
		raw = deadEnv.Val()
	case env.Err() == nil && i.waitsInGroup(ctx, t, slot, id, raw):
		info.State = StateWaiting
	case done.Err() == nil && doneUntil.Err() == nil && int64(doneUntil.Val()) > now.Val().UnixMilli():
		// Finished, and still within its retention (a record whose time
		// is up may wait for a later call to trim it: it is gone).
		rec, err := life.DecodeRecord([]byte(done.Val()))
		if err != nil {
			return MessageInfo{}, fmt.Errorf("rmq: message %s of %s: %w", id, t.Name(), err)
		}
		info.State = StateCompleted
		if rec.State == life.RecordCancelled {
			info.State = StateCancelled
		}
		info.Result, info.FinishedAt = rec.Result, rec.FinishedAt
		raw = string(rec.Envelope)
	default:
		return MessageInfo{}, fmt.Errorf("%w: %s in %s", ErrMessageNotFound, id, t.Name())
	}
	e, err := scripts.DecodeEnvelope([]byte(raw))
	if err != nil {
		return MessageInfo{}, fmt.Errorf("rmq: message %s of %s: %w", id, t.Name(), err)
	}
	info.Body = e.Body
	info.Headers = e.Options.Headers
	info.MaxRetries = -1
	if e.Options.HasMaxRetries {
		info.MaxRetries = e.Options.MaxRetries
	}
	if e.Options.ExpiresAtMs > 0 {
		info.ExpiresAt = time.UnixMilli(e.Options.ExpiresAtMs)
	}
	info.Timeout = time.Duration(e.Options.TimeoutMs) * time.Millisecond
	info.Attempts = e.Failures
	info.Snoozes = e.Options.Snoozes
	info.FirstSentAt = time.UnixMilli(int64(e.FirstSentMs))
	info.LastError = e.LastError
	info.Group = e.Options.Group
	if t.Type().TimeBased() {
		if info.State == StateWaiting {
			info.Due = time.UnixMilli(int64(store.Val()))
		} else if info.Due.IsZero() {
			info.Due = time.UnixMilli(int64(e.Score))
		}
	} else {
		info.Priority = int64(e.OrigScore)
	}
	return info, nil
}

// waitsInGroup reports whether id, whose envelope is raw, waits in its
// group's queue (producer.WithGroup) in slot.
func (i *Inspector) waitsInGroup(ctx context.Context, t topic.Topic, slot int, id, raw string) bool {
	e, err := scripts.DecodeEnvelope([]byte(raw))
	if err != nil || e.Options.Group == "" {
		return false
	}
	m := scripts.GroupMember(e.Options.Group, t.Type().TimeBased(), e.OrigScore, id)
	return i.rdb.ZScore(ctx, keyspace.GroupKeysFor(i.prefix, t, slot).Queue, m).Err() == nil
}
