package producer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// maxScore bounds priorities and due times: Redis scores are doubles, exact
// for integers up to 2^53.
const maxScore = 1 << 53

// maxOptionMs bounds the times of the per-message options (expiry, not
// before): the envelope keeps them in 48 bits of ms (about year 10889), so
// a later one would wrap.
const maxOptionMs = 1<<48 - 1

// maxRange bounds a range-merge window (about 100 years).
const maxRange = 100 * 365 * 24 * time.Hour

// Producer sends messages. It is safe for concurrent use.
type Producer struct {
	rdb         redis.UniversalClient
	prefix      string
	maxBodySize int
	notify      options.SendNotifier // nil: none
	wakeCmd     string
	defined     sync.Map // topic name -> *definedTopic (define.go)
	// redefineEvery is redefineInterval; tests shorten it.
	redefineEvery time.Duration
	gc            *groupcommit.Group[*pending]
	// merged: one script call may name several slots (a single node).
	merged bool
	clk    sendClock
}

// Prefix returns the key prefix.
func (p *Producer) Prefix() string { return p.prefix }

// SendRangeMerge sends a message due timeRange after its first send. A
// message with the same id sent while this one waits merges into it: one
// delivery, at the first send's due time, with the latest body.
func (p *Producer) SendRangeMerge(ctx context.Context, t topic.Topic, body []byte, timeRange time.Duration, opts ...SendOption) (string, error) {
	score, err := rangeScore(timeRange)
	if err != nil {
		return "", err
	}
	return p.send(ctx, t, topic.RangeMerge, body, score, opts)
}

// SendPriority sends a message delivered before every waiting message of
// lower priority. priority must be at least topic.MinPriority (17). A message
// with the same id that is still waiting takes the new priority and body.
func (p *Producer) SendPriority(ctx context.Context, t topic.Topic, body []byte, priority int64, opts ...SendOption) (string, error) {
	score, err := priorityScore(priority)
	if err != nil {
		return "", err
	}
	return p.send(ctx, t, topic.Priority, body, score, opts)
}

// SendFixedTime sends a message due at at; a time in the past is due at
// once. It is never delivered before at, at full time.Time precision: the
// due time is stored in ms, rounded up. A message with the same id that is still
// waiting takes the new time and body: last write wins.
func (p *Producer) SendFixedTime(ctx context.Context, t topic.Topic, body []byte, at time.Time, opts ...SendOption) (string, error) {
	score, err := fixedScore(at)
	if err != nil {
		return "", err
	}
	return p.send(ctx, t, topic.FixedTime, body, score, opts)
}

// rangeScore, priorityScore and fixedScore check the scheduling argument
// of each type and return what the script receives (for range-merge the
// range in ms; the script adds Redis's clock).
func rangeScore(d time.Duration) (float64, error) {
	if d < 0 || d > maxRange {
		return 0, fmt.Errorf("%w: %v", ErrInvalidRange, d)
	}
	// Rounded up, so the window never ends before the instant it stands
	// for (the script starts it from Redis's ms rounded up, too).
	return float64((d + time.Millisecond - 1) / time.Millisecond), nil
}

func priorityScore(priority int64) (float64, error) {
	if priority < topic.MinPriority || priority > maxScore {
		return 0, fmt.Errorf("%w: %d (want %d <= priority <= 2^53)", ErrInvalidPriority, priority, topic.MinPriority)
	}
	return float64(priority), nil
}

func fixedScore(at time.Time) (float64, error) {
	if at.IsZero() {
		return 0, fmt.Errorf("%w: zero time", ErrInvalidTime)
	}
	ms := at.UnixMilli()
	if ms < 0 || ms >= maxScore {
		return 0, fmt.Errorf("%w: %v out of range", ErrInvalidTime, at)
	}
	// Never early: a sub-millisecond part rounds the due ms up, and a
	// message is due when its score is at most Redis's ms rounded down.
	if at.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return float64(ms), nil
}

func (p *Producer) send(ctx context.Context, t topic.Topic, typ topic.Type, body []byte, score float64, opts []SendOption) (string, error) {
	if err := p.checkTopic(t, typ); err != nil {
		return "", err
	}
	sc, err := sendOptions(opts, typ)
	if err != nil {
		return "", err
	}
	it, err := p.item(t, body, score, sc)
	if err != nil {
		return "", err
	}
	afters := p.runHooks(ctx, it)
	id, err := p.sendItem(ctx, t, it)
	callAfters(afters, id, err)
	return id, err
}

func (p *Producer) sendItem(ctx context.Context, t topic.Topic, it *pending) (string, error) {
	if err := it.encodeOptions(); err != nil {
		return "", err
	}
	// Everything is validated; only now may anything be written.
	if err := p.define(ctx, t); err != nil {
		return "", err
	}
	if it.job.group != "" {
		if err := p.markGrouped(ctx, t); err != nil {
			return "", err
		}
	}
	// A caller that gives up may still see its message sent, as after any
	// timeout.
	err := p.gc.Do(ctx, it)
	if err == nil {
		err = it.err
	}
	if err != nil {
		return "", fmt.Errorf("rmq: send to %s: %w", t.Name(), err)
	}
	res := it.res
	if p.notify != nil {
		p.notify.Sent(t, int(res))
	}
	return it.id, nil
}

// item validates one message and works out its id and slot.
func (p *Producer) item(t topic.Topic, body []byte, score float64, sc sendConfig) (*pending, error) {
	if len(body) == 0 {
		return nil, ErrEmptyBody
	}
	if len(body) > p.maxBodySize {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrBodyTooLarge, len(body), p.maxBodySize)
	}
	it := &pending{topic: t, id: sc.key, body: body, score: score, nonce: scripts.NewNonce(), job: sc.job}
	if !sc.hasKey {
		it.id = BodyID(body)
	}
	if sc.hasUnique {
		// Checked by sendOptions.
		it.unique, _ = uniqueMs(sc.unique)
	}
	basis := sc.basis
	if sc.hasGroup {
		// The group picks the slot: its state lives in one slot.
		it.job.group = sc.group
		basis = []byte(sc.group)
	} else if !sc.hasBasis {
		if sc.hasKey {
			basis = []byte(sc.key)
		} else {
			basis = body
		}
	}
	it.slot = slots.Index(basis, t.SlotAmount())
	return it, nil
}

// checkTopic validates the topic and the send method.
func (p *Producer) checkTopic(t topic.Topic, typ topic.Type) error {
	if t.IsZero() {
		return fmt.Errorf("%w: zero Topic (use topic.New)", topic.ErrInvalidName)
	}
	if t.Type() != typ {
		return fmt.Errorf("%w: topic %s is %s, not %s", ErrTypeMismatch, t.Name(), t.Type(), typ)
	}
	return nil
}

// sendOptions applies and validates send options; typ is the topic's type
// (0 for Remove, which takes no per-message options).
func sendOptions(opts []SendOption, typ topic.Type) (sendConfig, error) {
	var sc sendConfig
	for _, o := range opts {
		o(&sc)
	}
	if typ != 0 {
		if err := checkJob(sc.job, typ); err != nil {
			return sc, err
		}
	}
	if sc.hasKey && (sc.key == "" || len(sc.key) > MaxKeyLength) {
		return sc, fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidKey, len(sc.key), MaxKeyLength)
	}
	if sc.hasBasis && len(sc.basis) == 0 {
		return sc, ErrInvalidSlotBasis
	}
	if sc.hasUnique && typ != 0 {
		if _, err := uniqueMs(sc.unique); err != nil {
			return sc, err
		}
	}
	if sc.hasGroup {
		if err := checkGroup(sc.group); err != nil {
			return sc, err
		}
		if sc.hasBasis {
			return sc, fmt.Errorf("%w: WithGroup picks the slot; it cannot be combined with WithSlotBasis", ErrInvalidGroup)
		}
	}
	return sc, nil
}

// BodyID is the id of a message sent without WithKey: 72 bits of the body's
// SHA-256, 12 URL-safe characters. The id is stored twice per message (store
// member and msg field); at 12 characters each copy fits Redis's 16-byte
// allocation class, 32 bytes less per message than 16 characters, and two
// different bodies of one slot collide only past tens of billions of them.
func BodyID(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// Removed says what Remove found and deleted.
type Removed int

const (
	// NotFound: no message with the id waits or is in flight (unknown,
	// acked, or dead: see Inspector.DeleteDead).
	NotFound Removed = iota
	// RemovedWaiting: it waited in store (or in its group's queue, or,
	// a flow's parent, for its children).
	RemovedWaiting
	// RemovedDelayed: it waited for its time (a priority message sent
	// with WithNotBefore or WithDelay, or a priority retry in its backoff).
	RemovedDelayed
	// RemovedInFlight: a delivery of it was running. That delivery's ack
	// is refused and it is never redelivered. (A re-send of the id waiting
	// behind it is removed too.)
	RemovedInFlight
)

func (r Removed) String() string {
	switch r {
	case NotFound:
		return "not found"
	case RemovedWaiting:
		return "removed waiting"
	case RemovedDelayed:
		return "removed delayed"
	case RemovedInFlight:
		return "removed in flight"
	}
	return "unknown"
}

// removedOf maps remove.lua's sum of places to a Removed.
func removedOf(what int64) Removed {
	switch {
	case what&4 != 0:
		return RemovedInFlight
	case what&1 != 0:
		return RemovedWaiting
	case what&2 != 0:
		return RemovedDelayed
	}
	return NotFound
}

// Remove deletes a message and its body wherever it is: waiting, waiting
// for its time, or being handled, and says which. A flow's parent waiting
// for its children is RemovedWaiting: it never runs, its children run on
// and its own parent sees it removed (docs/flows.md). Pass WithSlotBasis when
// the message was sent with one; without it the id's own slot is tried
// first, then every slot of the topic.
func (p *Producer) Remove(ctx context.Context, t topic.Topic, id string, opts ...SendOption) (Removed, error) {
	removed, err := p.remove(ctx, t, id, opts)
	if err == nil && p.notify != nil {
		p.notify.Removed(t, removed != NotFound)
	}
	return removed, err
}

func (p *Producer) remove(ctx context.Context, t topic.Topic, id string, opts []SendOption) (Removed, error) {
	if t.IsZero() {
		return NotFound, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	if id == "" || len(id) > MaxKeyLength {
		return NotFound, fmt.Errorf("%w: length %d", ErrInvalidKey, len(id))
	}
	sc, err := sendOptions(opts, 0)
	if err != nil {
		return NotFound, err
	}
	basis := []byte(id)
	if sc.hasBasis {
		basis = sc.basis
	}
	if sc.hasGroup {
		basis = []byte(sc.group)
	}
	first := slots.Index(basis, t.SlotAmount())
	if r, err := p.removeAt(ctx, t, first, id); r != NotFound || err != nil || sc.hasBasis || sc.hasGroup {
		return r, err
	}
	// A body-derived id lives in the slot of its body, which only the
	// producer that sent it knew: look for it in every slot at once. An id
	// has an envelope exactly while it waits (in store, in the delayed set
	// or in its group) or is in flight, so one HEXISTS a slot finds it.
	// A flow's parent waiting for its children has no envelope but its
	// record.
	envs := make([]*redis.BoolCmd, t.SlotAmount())
	recs := make([]*redis.IntCmd, t.SlotAmount())
	pipe := p.rdb.Pipeline()
	for i := range envs {
		if i != first {
			envs[i] = pipe.HExists(ctx, keyspace.KeysFor(p.prefix, t, i).Msg, id)
			recs[i] = pipe.Exists(ctx, keyspace.TreeRecordKey(p.prefix, t.Name(), i, id))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return NotFound, fmt.Errorf("rmq: remove from %s: %w", t.Name(), err)
	}
	for i, e := range envs {
		if e != nil && (e.Val() || recs[i].Val() == 1) {
			return p.removeAt(ctx, t, i, id)
		}
	}
	return NotFound, nil
}

func (p *Producer) removeAt(ctx context.Context, t topic.Topic, slot int, id string) (Removed, error) {
	k := keyspace.KeysFor(p.prefix, t, slot)
	g := keyspace.GroupKeysFor(p.prefix, t, slot)
	lk := keyspace.LifeKeysFor(p.prefix, t.Name(), slot).Slice()
	// The topic's event log records the removal in the same call; a
	// setting that cannot be read is no reason to keep a message.
	ls, _, err := life.Read(ctx, p.rdb, p.prefix, t.Name())
	if err != nil && !errors.Is(err, life.ErrInvalidSettings) {
		return NotFound, err
	}
	// With the slot's group keys: a removed message that held its group's
	// place (WithGroupConcurrency) frees it in the same call, whatever the
	// consumers' limits, and the group's next message may go. With its
	// life keys: the removal is in the event log and the id's waiters
	// (rmq's Client.Wait) hear of it.
	keys := append([]string{k.Store, k.Prepare, k.Msg, k.Delayed, g.Queue, g.Places, g.Turn, k.Wake}, lk[:]...)
	n, err := scripts.Remove.Run(ctx, p.rdb, keys, id, p.wakeCmd, ls.Events).Int64()
	if err != nil {
		return NotFound, fmt.Errorf("rmq: remove from %s: %w", t.Name(), err)
	}
	if r := removedOf(n); r != NotFound {
		return r, p.flowEnded(ctx, t, slot, id)
	}
	// Not in store, delayed or prepare: it may wait in its group
	// (WithGroup), which remove.lua does not look at.
	n, err = scripts.GRemove.Run(ctx, p.rdb, append([]string{k.Msg, g.Queue}, lk[:]...), id, p.wakeCmd, ls.Events).Int64()
	if err != nil {
		return NotFound, fmt.Errorf("rmq: remove from %s: %w", t.Name(), err)
	}
	if n == 1 {
		return RemovedWaiting, p.flowEnded(ctx, t, slot, id)
	}
	// A flow's parent waiting for its children is only in its record: it
	// ends there (its children run on, their outcomes release nothing).
	if ok, err := flowtree.NewReporter(p.rdb, p.prefix).End(ctx, t.Name(), slot, id, 'r'); ok || err != nil {
		return RemovedWaiting, err
	}
	return NotFound, nil
}

// flowEnded reports a removed flow child's end to its parent.
func (p *Producer) flowEnded(ctx context.Context, t topic.Topic, slot int, id string) error {
	return flowtree.NewReporter(p.rdb, p.prefix).Ended(ctx, t.Name(), slot, id, 'r')
}
