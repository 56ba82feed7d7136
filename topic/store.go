package topic

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// ErrConflict is returned when a topic is defined with another type or slot
// amount than the definition already stored in Redis. Changing either would
// strand messages in slots nobody reads, so it is refused.
var ErrConflict = errors.New("rmq: topic conflicts with its stored definition")

// Define stores t's definition in the hash at key, or checks that the stored
// one matches. It is a single-key write (HSETNX), safe to run twice.
func Define(ctx context.Context, rdb redis.Cmdable, key string, t Topic) error {
	if t.IsZero() {
		return fmt.Errorf("%w: zero Topic", ErrInvalidName)
	}
	def := t.Definition()
	created, err := rdb.HSetNX(ctx, key, t.name, def).Result()
	if err != nil {
		return fmt.Errorf("rmq: define topic %s: %w", t.name, err)
	}
	if created {
		return nil
	}
	stored, err := rdb.HGet(ctx, key, t.name).Result()
	if err != nil {
		return fmt.Errorf("rmq: define topic %s: %w", t.name, err)
	}
	if stored != def {
		return fmt.Errorf("%w: %s is stored as %s, defined here as %s", ErrConflict, t.name, stored, def)
	}
	return nil
}

// Lookup returns the stored definition of a topic; found is false when the
// topic was never defined.
func Lookup(ctx context.Context, rdb redis.Cmdable, key, name string) (t Topic, found bool, err error) {
	def, err := rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, redis.Nil) {
		return Topic{}, false, nil
	}
	if err != nil {
		return Topic{}, false, fmt.Errorf("rmq: look up topic %s: %w", name, err)
	}
	t, err = ParseDefinition(name, def)
	return t, err == nil, err
}

// List returns every stored topic definition, sorted by name.
func List(ctx context.Context, rdb redis.Cmdable, key string) ([]Topic, error) {
	defs, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: list topics: %w", err)
	}
	out := make([]Topic, 0, len(defs))
	for name, def := range defs {
		t, err := ParseDefinition(name, def)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}
