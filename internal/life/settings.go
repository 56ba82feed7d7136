package life

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// Settings are what a topic keeps of its messages' life after hand-off,
// stored with the topic (keyspace.LifeSettingsKey) like its limits: the
// stored ones win over a consumer's options.
type Settings struct {
	// Retention is how long finished messages (completed, cancelled) stay
	// readable with their result; 0: not at all.
	Retention time.Duration
	// Events is about how many events each slot's log keeps; 0: no log.
	Events int
}

// Bounds of the settings.
const (
	MaxRetention = 30 * 24 * time.Hour
	MaxEvents    = 10_000_000
)

// ErrInvalidSettings is returned for settings out of bounds or unreadable.
var ErrInvalidSettings = errors.New("rmq: invalid lifecycle settings")

// IsZero reports whether s keeps nothing.
func (s Settings) IsZero() bool { return s == Settings{} }

// Validate checks the bounds: retention 0 or 1 ms .. MaxRetention in
// whole ms, events 0 .. MaxEvents.
func (s Settings) Validate() error {
	switch {
	case s.Retention < 0 || s.Retention > MaxRetention || s.Retention%time.Millisecond != 0:
		return fmt.Errorf("%w: retention %v (0, or whole ms up to %v)", ErrInvalidSettings, s.Retention, MaxRetention)
	case s.Events < 0 || s.Events > MaxEvents:
		return fmt.Errorf("%w: events %d (0..%d)", ErrInvalidSettings, s.Events, MaxEvents)
	}
	return nil
}

// String is the stored form: "retention=<ms> events=<n>".
func (s Settings) String() string {
	return "retention=" + strconv.FormatInt(s.Retention.Milliseconds(), 10) + " events=" + strconv.Itoa(s.Events)
}

// ParseSettings reads the stored form.
func ParseSettings(v string) (Settings, error) {
	var s Settings
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil {
			return Settings{}, fmt.Errorf("%w: %q", ErrInvalidSettings, v)
		}
		switch k {
		case "retention":
			s.Retention = time.Duration(n) * time.Millisecond
		case "events":
			s.Events = int(n)
		default:
			return Settings{}, fmt.Errorf("%w: %q", ErrInvalidSettings, v)
		}
	}
	return s, s.Validate()
}

// Read returns the settings stored for the topic named name; found is
// false when none are.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix, name string) (s Settings, found bool, err error) {
	v, err := rdb.HGet(ctx, keyspace.LifeSettingsKey(prefix), name).Result()
	if errors.Is(err, redis.Nil) {
		return Settings{}, false, nil
	}
	if err != nil {
		return Settings{}, false, fmt.Errorf("rmq: read the lifecycle settings of %s: %w", name, err)
	}
	s, err = ParseSettings(v)
	return s, err == nil, err
}

// Store stores s for the topic named name (the Inspector's change: it
// replaces what was stored).
func Store(ctx context.Context, rdb redis.UniversalClient, prefix, name string, s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if err := rdb.HSet(ctx, keyspace.LifeSettingsKey(prefix), name, s.String()).Err(); err != nil {
		return fmt.Errorf("rmq: store the lifecycle settings of %s: %w", name, err)
	}
	return nil
}

// Resolve decides the settings in force for a consumer that asks for
// opts: the stored ones win; when none are stored and opts keep
// something, opts are stored (HSETNX: of consumers starting together the
// first wins and the others obey it). differs reports that opts are not
// zero and not what is in force, for the caller's warning.
func Resolve(ctx context.Context, rdb redis.UniversalClient, prefix, name string, opts Settings) (s Settings, differs bool, err error) {
	key := keyspace.LifeSettingsKey(prefix)
	if !opts.IsZero() {
		set, err := rdb.HSetNX(ctx, key, name, opts.String()).Result()
		if err != nil {
			return Settings{}, false, fmt.Errorf("rmq: store the lifecycle settings of %s: %w", name, err)
		}
		if set {
			return opts, false, nil
		}
	}
	s, _, err = Read(ctx, rdb, prefix, name)
	if err != nil {
		return Settings{}, false, err
	}
	return s, !opts.IsZero() && s != opts, nil
}
