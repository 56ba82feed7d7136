// Package inspect does the Redis work of rmq.Inspector: reading a topic's
// queues (statistics, waiting messages, one message, the dead queue) and
// repairing them (requeue, delete, purge, pause). Every change is one Lua
// script per topic slot. It returns its own types, which package rmq
// converts to the public ones, so it imports no public package but topic
// and slots, and rmq's Inspector is a thin wrapper.
package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/topicstore"
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
	// ErrInvalidPageSize is returned for a page size outside 1..MaxListLimit.
	ErrInvalidPageSize = errors.New("rmq: invalid page size")
)

// Inspector does the Redis work of rmq.Inspector, which wraps it: every
// read and repair of the queues under one key prefix. It returns this
// package's types, which rmq converts to its public ones, and the error
// values it declares (rmq's under the same names).
type Inspector struct {
	rdb     redis.UniversalClient
	prefix  string
	wakeCmd string
	err     error // a configuration error, returned by every call
}

// New returns an inspector on rdb under prefix. err, when not nil, is a
// configuration error the caller found (a nil rdb, a bad option): every
// call returns it. Without one, a bad prefix is that error.
func New(rdb redis.UniversalClient, prefix string, err error) *Inspector {
	if err == nil {
		err = keyspace.ValidatePrefix(prefix)
	}
	i := &Inspector{rdb: rdb, prefix: prefix, err: err}
	if rdb != nil {
		i.wakeCmd = scripts.WakeCommand(rdb)
	}
	return i
}

// Err returns the configuration error every call returns (nil: none).
func (i *Inspector) Err() error { return i.err }

// Prefix is the work of rmq.Inspector.Prefix, whose doc says what it does.
func (i *Inspector) Prefix() string { return i.prefix }

// Topics is the work of rmq.Inspector.Topics, whose doc says what it does.
func (i *Inspector) Topics(ctx context.Context) ([]topic.Topic, error) {
	if i.err != nil {
		return nil, i.err
	}
	return topicstore.List(ctx, i.rdb, keyspace.TopicsKey(i.prefix))
}

// Topic is the work of rmq.Inspector.Topic, whose doc says what it does.
func (i *Inspector) Topic(ctx context.Context, name string) (topic.Topic, error) {
	if i.err != nil {
		return topic.Topic{}, i.err
	}
	if err := topic.ValidateName(name); err != nil {
		return topic.Topic{}, err
	}
	t, found, err := topicstore.Lookup(ctx, i.rdb, keyspace.TopicsKey(i.prefix), name)
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
	stored, found, err := topicstore.Lookup(ctx, i.rdb, keyspace.TopicsKey(i.prefix), t.Name())
	if err != nil {
		return err
	}
	if found && stored.Definition() != t.Definition() {
		return fmt.Errorf("%w: %s is stored as %s, given as %s", topic.ErrConflict, t.Name(), stored.Definition(), t.Definition())
	}
	return nil
}

// Check is check, for rmq's own method on its Inspector (Remove).
func (i *Inspector) Check(ctx context.Context, t topic.Topic) error { return i.check(ctx, t) }

func (i *Inspector) keys(t topic.Topic, slot int) keyspace.Keys {
	return keyspace.KeysFor(i.prefix, t, slot)
}

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
