// Package topicstore keeps topic definitions in Redis: one hash, name ->
// topic.Topic.Definition(), at keyspace.TopicsKey(prefix). Clients, producers
// and the Inspector store and check them there; a user never calls it.
package topicstore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/topic"
)

// Define stores t's definition in the hash at key, or checks that the stored
// one matches. It is a single-key write (HSETNX), safe to run twice.
func Define(ctx context.Context, rdb redis.Cmdable, key string, t topic.Topic) error {
	if t.IsZero() {
		return fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	// HSETNX first, the read only when something was stored already: a
	// producer that found the definition lost (its recheck) pays one
	// command to store it again. Engines that start together use DefineIn,
	// one round trip for all of them.
	def := t.Definition()
	set, err := rdb.HSetNX(ctx, key, t.Name(), def).Result()
	if err != nil {
		return fmt.Errorf("rmq: define topic %s: %w", t.Name(), err)
	}
	if set {
		return nil
	}
	stored, err := rdb.HGet(ctx, key, t.Name()).Result()
	if err != nil {
		return fmt.Errorf("rmq: define topic %s: %w", t.Name(), err)
	}
	if stored != def {
		return fmt.Errorf("%w: %s is stored as %s, defined here as %s", topic.ErrConflict, t.Name(), stored, def)
	}
	return nil
}

// DefineIn queues Define's commands on p, so they ride a round trip with
// others (a consumer reads its pause state with them); check, called once
// p ran, returns Define's result. t must not be zero.
func DefineIn(ctx context.Context, p redis.Pipeliner, key string, t topic.Topic) (check func() error) {
	def := t.Definition()
	set := p.HSetNX(ctx, key, t.Name(), def)
	get := p.HGet(ctx, key, t.Name())
	return func() error {
		if err := set.Err(); err != nil {
			return fmt.Errorf("rmq: define topic %s: %w", t.Name(), err)
		}
		if set.Val() {
			return nil
		}
		stored, err := get.Result()
		if err != nil {
			return fmt.Errorf("rmq: define topic %s: %w", t.Name(), err)
		}
		if stored != def {
			return fmt.Errorf("%w: %s is stored as %s, defined here as %s", topic.ErrConflict, t.Name(), stored, def)
		}
		return nil
	}
}

// Lookup returns the stored definition of a topic; found is false when the
// topic was never defined.
func Lookup(ctx context.Context, rdb redis.Cmdable, key, name string) (t topic.Topic, found bool, err error) {
	def, err := rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, redis.Nil) {
		return topic.Topic{}, false, nil
	}
	if err != nil {
		return topic.Topic{}, false, fmt.Errorf("rmq: look up topic %s: %w", name, err)
	}
	t, err = topic.ParseDefinition(name, def)
	return t, err == nil, err
}

// List returns every stored topic definition, sorted by name.
func List(ctx context.Context, rdb redis.Cmdable, key string) ([]topic.Topic, error) {
	defs, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: list topics: %w", err)
	}
	out := make([]topic.Topic, 0, len(defs))
	for name, def := range defs {
		t, err := topic.ParseDefinition(name, def)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}
