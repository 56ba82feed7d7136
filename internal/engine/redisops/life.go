package redisops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/topic"
)

// Life is a topic's part in its messages' life after hand-off, as one
// engine sees it: each slot's life keys (built once), and the settings in
// force, the stored ones winning over the consumer's options
// (life.Resolve), read again after a wake-up said the topic's settings
// changed (MarkReread). Every call that ends a delivery names the life
// keys, whatever the settings: a waiter anywhere hears of every end, and
// with nobody waiting that costs one HLEN per call.
type Life struct {
	rdb    redis.UniversalClient
	prefix string
	topic  topic.Topic
	opts   life.Settings
	log    *slog.Logger

	keys   [][6]string // by slot
	cur    atomic.Pointer[life.Settings]
	reread atomic.Bool
}

// NewLife returns the life state of topic t under prefix for a consumer
// whose options ask for opts; it keeps nothing until Resolve.
func NewLife(rdb redis.UniversalClient, prefix string, t topic.Topic, opts life.Settings, log *slog.Logger) *Life {
	l := &Life{rdb: rdb, prefix: prefix, topic: t, opts: opts, log: log, keys: make([][6]string, t.SlotAmount())}
	for i := range l.keys {
		l.keys[i] = keyspace.LifeKeysFor(prefix, t.Name(), i).Slice()
	}
	l.cur.Store(&life.Settings{})
	return l
}

// Keys returns slot's life keys in the scripts' order.
func (l *Life) Keys(slot int) [6]string { return l.keys[slot] }

// Current returns the settings in force.
func (l *Life) Current() life.Settings { return *l.cur.Load() }

// Resolve decides the settings in force (life.Resolve), warning when the
// consumer's options differ from the stored ones, which win.
func (l *Life) Resolve(ctx context.Context) error {
	s, differs, err := life.Resolve(ctx, l.rdb, l.prefix, l.topic.Name(), l.opts)
	if err != nil {
		return err
	}
	l.cur.Store(&s)
	if differs {
		l.warnDiffers(ctx, s)
	}
	return nil
}

// ApplyStored decides the settings in force from get, the start-up read
// of the stored ones (an HGET of keyspace.LifeSettingsKey, in the round
// trip the engine's start shares): stored ones win; with none stored and
// options that keep something, Resolve stores them (or obeys the
// consumer that stored first).
func (l *Life) ApplyStored(ctx context.Context, get *redis.StringCmd) error {
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		if l.opts.IsZero() {
			l.cur.Store(&life.Settings{})
			return nil
		}
		return l.Resolve(ctx)
	case err != nil:
		return fmt.Errorf("rmq: read the lifecycle settings of %s: %w", l.topic.Name(), err)
	}
	s, err := life.ParseSettings(v)
	if err != nil {
		return err
	}
	l.cur.Store(&s)
	if !l.opts.IsZero() && s != l.opts {
		l.warnDiffers(ctx, s)
	}
	return nil
}

func (l *Life) warnDiffers(ctx context.Context, s life.Settings) {
	l.log.WarnContext(ctx, "rmq: the consumer's lifecycle options differ from the topic's stored settings; the stored ones apply",
		"stored", s.String(), "options", l.opts.String())
}

// MarkReread makes the next Ensure read the stored settings again (a
// wake-up said the topic's settings changed).
func (l *Life) MarkReread() { l.reread.Store(true) }

// Ensure resolves the settings again when MarkReread asked for it; a
// read that fails keeps the settings in force and is tried again next time.
func (l *Life) Ensure(ctx context.Context) {
	if !l.reread.CompareAndSwap(true, false) {
		return
	}
	if err := l.Resolve(ctx); err != nil {
		l.reread.Store(true)
		l.log.WarnContext(ctx, "rmq: read the topic's lifecycle settings", "err", err)
	}
}

// maxRetriesArg is rollback.lua's and sweep.lua's ARGV[2] for a call that
// names the life keys: the max retries ending in "L".
func maxRetriesArg(n int) string { return strconv.Itoa(n) + "L" }
