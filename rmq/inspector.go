package rmq

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

var (
	// ErrUnknownTopic is returned by Inspector.Topic for a name with no
	// stored definition.
	ErrUnknownTopic = errors.New("rmq: unknown topic")
	// ErrMessageNotFound is returned by Inspector.Message when no message
	// has the id, and by Inspector.DeadMessage when no dead message has it.
	ErrMessageNotFound = errors.New("rmq: message not found")
	// ErrInvalidCursor is returned for a cursor that is not one a listing
	// returned for the same topic.
	ErrInvalidCursor = errors.New("rmq: invalid cursor")
	// ErrInvalidLimit is returned for a page size outside 1..MaxListLimit.
	ErrInvalidLimit = errors.New("rmq: invalid limit")
)

// Inspector reads and repairs the queues of every topic under one key
// prefix: statistics, waiting messages, and the dead queue (list, show,
// requeue, delete). It needs no listener and starts no goroutine; it is
// safe for concurrent use. Every change it makes is one Lua script per topic
// slot, so it can run next to live producers and consumers.
type Inspector struct {
	rdb     redis.UniversalClient
	prefix  string
	wakeCmd string
	err     error // a configuration error, returned by every call
}

// Inspector returns an inspector on the client's Redis and key prefix.
func (c *Client) Inspector() *Inspector { return newInspector(c.rdb, c.cfg.prefix) }

// NewInspector returns an inspector on rdb (a *redis.Client or
// *redis.ClusterClient) that needs no client. Its one option is the key
// prefix (WithPrefix; default "rmq"); see InspectorOption. A nil rdb, a nil
// option or a bad prefix is reported by every later call.
func NewInspector(rdb redis.UniversalClient, opts ...InspectorOption) *Inspector {
	cfg := inspectorConfig{prefix: slots.DefaultPrefix}
	var bad error
	for _, o := range opts {
		if o == nil {
			bad = fmt.Errorf("%w: nil inspector option", ErrInvalidOption)
			continue
		}
		o.applyInspector(&cfg)
	}
	i := newInspector(rdb, cfg.prefix)
	switch {
	case rdb == nil:
		i.err = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	case bad != nil:
		i.err = bad
	}
	return i
}

func newInspector(rdb redis.UniversalClient, prefix string) *Inspector {
	i := &Inspector{rdb: rdb, prefix: prefix, err: slots.ValidatePrefix(prefix)}
	if rdb != nil {
		i.wakeCmd = scripts.WakeCommand(rdb)
	}
	return i
}

// Prefix returns the key prefix the inspector reads.
func (i *Inspector) Prefix() string { return i.prefix }

// Topics returns every topic defined under the prefix (producers and
// consumers store a topic's definition on first use), sorted by name.
func (i *Inspector) Topics(ctx context.Context) ([]topic.Topic, error) {
	if i.err != nil {
		return nil, i.err
	}
	return topicstore.List(ctx, i.rdb, slots.TopicsKey(i.prefix))
}

// Topic returns the stored definition of the topic called name, or
// ErrUnknownTopic.
func (i *Inspector) Topic(ctx context.Context, name string) (topic.Topic, error) {
	if i.err != nil {
		return topic.Topic{}, i.err
	}
	if err := topic.ValidateName(name); err != nil {
		return topic.Topic{}, err
	}
	t, found, err := topicstore.Lookup(ctx, i.rdb, slots.TopicsKey(i.prefix), name)
	if err != nil {
		return topic.Topic{}, err
	}
	if !found {
		return topic.Topic{}, fmt.Errorf("%w: %s (under prefix %q)", ErrUnknownTopic, name, i.prefix)
	}
	return t, nil
}

// check validates the inspector and t, and refuses a t whose type or slot
// amount differs from its stored definition: reading the wrong slots would
// show (or change) the wrong messages. A topic never stored is accepted
// (its queues are empty).
func (i *Inspector) check(ctx context.Context, t topic.Topic) error {
	if i.err != nil {
		return i.err
	}
	if t.IsZero() {
		return fmt.Errorf("%w: zero Topic (use topic.New)", topic.ErrInvalidName)
	}
	stored, found, err := topicstore.Lookup(ctx, i.rdb, slots.TopicsKey(i.prefix), t.Name())
	if err != nil {
		return err
	}
	if found && stored.Definition() != t.Definition() {
		return fmt.Errorf("%w: %s is stored as %s, given as %s", topic.ErrConflict, t.Name(), stored.Definition(), t.Definition())
	}
	return nil
}

func (i *Inspector) keys(t topic.Topic, slot int) slots.Keys {
	return slots.KeysFor(i.prefix, t, slot)
}

// Remove deletes a message and its body wherever it waits or runs, like
// Producer.Remove (which also says where it was): it returns false when no
// message with that id waits or is in flight (unknown, or dead: see
// DeleteDead).
func (i *Inspector) Remove(ctx context.Context, t topic.Topic, id string) (bool, error) {
	if err := i.check(ctx, t); err != nil {
		return false, err
	}
	p, err := producer.New(i.rdb, producer.WithPrefix(i.prefix))
	if err != nil {
		return false, err
	}
	r, err := p.Remove(ctx, t, id)
	return r != producer.NotFound, err
}

// script is one script call on one slot.
// pipelineChunk bounds how many commands go into one pipeline.
const pipelineChunk = 512

// pipelined runs add for n items in pipelines of at most pipelineChunk
// items, and returns the first error other than redis.Nil.
func (i *Inspector) pipelined(ctx context.Context, n int, add func(pipe redis.Pipeliner, j int)) error {
	for from := 0; from < n; from += pipelineChunk {
		pipe := i.rdb.Pipeline()
		for j := from; j < min(n, from+pipelineChunk); j++ {
			add(pipe, j)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
		}
	}
	return nil
}
