package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/topic"
)

// SetLimits is the work of rmq.Inspector.SetLimits, whose doc says what it
// does; limits that fail options.Limits.Check are refused with invalid
// (rmq.ErrInvalidLimits) wrapping the reason.
func (i *Inspector) SetLimits(ctx context.Context, t topic.Topic, l options.Limits, invalid error) error {
	if err := i.check(ctx, t); err != nil {
		return err
	}
	if err := l.Check(); err != nil {
		return fmt.Errorf("%w: %v", invalid, err)
	}
	key := keyspace.LimitsKey(i.prefix)
	var err error
	if l.IsZero() {
		err = i.rdb.HDel(ctx, key, t.Name()).Err()
	} else {
		err = i.rdb.HSet(ctx, key, t.Name(), l.String()).Err()
	}
	if err != nil {
		return fmt.Errorf("rmq: set the limits of %s: %w", t.Name(), err)
	}
	// As Pause: stored first, then every slot's consumers are told.
	return i.tellSlots(ctx, t, "L")
}

// Limits is the work of rmq.Inspector.Limits, whose doc says what it does.
func (i *Inspector) Limits(ctx context.Context, t topic.Topic) (options.Limits, error) {
	if i.err != nil {
		return options.Limits{}, i.err
	}
	s, err := i.rdb.HGet(ctx, keyspace.LimitsKey(i.prefix), t.Name()).Result()
	if errors.Is(err, redis.Nil) {
		return options.Limits{}, nil
	}
	if err != nil {
		return options.Limits{}, fmt.Errorf("rmq: limits of %s: %w", t.Name(), err)
	}
	return options.ParseLimits(s)
}

// AdaptiveLimit is rmq.AdaptiveLimit field for field, whose doc says what
// each field means.
type AdaptiveLimit struct {
	Client   string
	Limit    int
	Min, Max int
}

// Flow returns t's stored limits and the adaptive limits its clients
// reported that are live at Redis time now, sorted by client: what
// rmq.Stats shows of flow control.
func (i *Inspector) Flow(ctx context.Context, t topic.Topic, now time.Time) (options.Limits, []AdaptiveLimit, error) {
	l, err := i.Limits(ctx, t)
	if err != nil {
		return options.Limits{}, nil, err
	}
	m, err := i.rdb.HGetAll(ctx, keyspace.AdaptiveKey(i.prefix, t)).Result()
	if err != nil {
		return options.Limits{}, nil, fmt.Errorf("rmq: adaptive limits of %s: %w", t.Name(), err)
	}
	var out []AdaptiveLimit
	for client, v := range m {
		f := strings.Fields(v)
		if len(f) != 4 {
			continue
		}
		limit, _ := strconv.Atoi(f[0])
		lo, _ := strconv.Atoi(f[1])
		hi, _ := strconv.Atoi(f[2])
		exp, _ := strconv.ParseInt(f[3], 10, 64)
		if exp < now.UnixMilli() {
			continue // its client stopped reporting
		}
		out = append(out, AdaptiveLimit{Client: client, Limit: limit, Min: lo, Max: hi})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Client < out[b].Client })
	return l, out, nil
}
