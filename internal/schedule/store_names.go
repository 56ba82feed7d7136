package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Names returns the names of the schedules whose name starts with prefix,
// from the registry alone: no definition or body is read (HSCAN with a
// MATCH, so only the matching entries travel).
func (s *Store) Names(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	match := globEscape(prefix) + "*"
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, RegistryKey(s.prefix), cursor, match, 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("rmq: list schedule names: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			names = append(names, kv[i])
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return dedup(names), nil
}

// dedup drops the repeats HSCAN may return.
func dedup(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Exist reports which of names have a schedule, from the registry alone.
func (s *Store) Exist(ctx context.Context, names []string) ([]bool, error) {
	out := make([]bool, len(names))
	if len(names) == 0 {
		return out, nil
	}
	vals, err := s.rdb.HMGet(ctx, RegistryKey(s.prefix), names...).Result()
	if err != nil {
		return nil, fmt.Errorf("rmq: look schedules up: %w", err)
	}
	for i, v := range vals {
		out[i] = v != nil
	}
	return out, nil
}

// ReadNames reads the schedules of names (a name without one is left
// out), and only those.
func (s *Store) ReadNames(ctx context.Context, names []string) ([]Record, time.Time, error) {
	regs := make(map[string]Registration, len(names))
	if len(names) > 0 {
		vals, err := s.rdb.HMGet(ctx, RegistryKey(s.prefix), names...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, time.Time{}, fmt.Errorf("rmq: look schedules up: %w", err)
		}
		for i, v := range vals {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			if reg, err := decodeRegistration(raw); err == nil {
				regs[names[i]] = reg
			}
		}
	}
	return s.read(ctx, regs)
}

// globEscape escapes the glob characters of a MATCH pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
