package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Schedule is rmq.Schedule field for field (rmq converts one to the other),
// whose doc says what each field means.
type Schedule struct {
	Name     string
	Spec     string
	Location *time.Location
	Topic    topic.Topic
	Priority int64
	Body     []byte
	Options  []producer.SendOption
	CatchUp  time.Duration
	Paused   bool
}

// Manager does the work of rmq.Schedules, which wraps it: it validates
// schedules and names before the store sees them, and converts what the
// store reads back to Info.
type Manager struct {
	rdb         redis.UniversalClient
	prefix      string
	maxBodySize int
	store       *Store
	err         error // a configuration error, returned by every call
}

// NewManager manages the schedules of prefix on rdb, accepting bodies of
// up to maxBodySize bytes. err, when not nil, is a configuration error the
// caller found (a nil option): every call returns it; without one, a nil
// rdb or a bad prefix is that error (errNilClient wraps the caller's
// sentinel for a nil rdb).
func NewManager(rdb redis.UniversalClient, prefix string, maxBodySize int, err, errNilClient error) *Manager {
	m := &Manager{rdb: rdb, prefix: prefix, maxBodySize: maxBodySize, err: keyspace.ValidatePrefix(prefix)}
	switch {
	case rdb == nil:
		m.err = errNilClient
	case err != nil:
		m.err = err
	}
	if rdb != nil {
		m.store = NewStore(rdb, prefix)
	}
	return m
}

// ready returns the configuration error, else the error of a bad name.
func (m *Manager) ready(name string) error {
	if m.err != nil {
		return m.err
	}
	return checkName(name)
}

// Set is the work of rmq.Schedules.Set, whose doc says what it does.
func (m *Manager) Set(ctx context.Context, sc Schedule) error {
	if m.err != nil {
		return m.err
	}
	spec, def, msg, err := m.check(sc)
	if err != nil {
		return err
	}
	// Everything is valid: only now is anything written.
	if err := topicstore.Define(ctx, m.rdb, keyspace.TopicsKey(m.prefix), sc.Topic); err != nil {
		return err
	}
	return m.store.Put(ctx, sc.Name, sc.Topic, def, msg, spec, sc.Paused)
}

// Get is the work of rmq.Schedules.Get.
func (m *Manager) Get(ctx context.Context, name string) (Info, error) {
	if err := m.ready(name); err != nil {
		return Info{}, err
	}
	rec, now, err := m.store.Get(ctx, name)
	if err != nil {
		return Info{}, err
	}
	return infoOf(rec, now)
}

// List is the work of rmq.Schedules.List.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	if m.err != nil {
		return nil, m.err
	}
	return infos(m.store.List(ctx))
}

// ListPrefix is the work of rmq.Schedules.ListPrefix.
func (m *Manager) ListPrefix(ctx context.Context, prefix string) ([]Info, error) {
	if m.err != nil {
		return nil, m.err
	}
	names, err := m.store.Names(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return infos(m.store.ReadNames(ctx, names))
}

// Names is the work of rmq.Schedules.Names.
func (m *Manager) Names(ctx context.Context, prefix string) ([]string, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.store.Names(ctx, prefix)
}

// Exist is the work of rmq.Schedules.Exist.
func (m *Manager) Exist(ctx context.Context, names ...string) ([]bool, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.store.Exist(ctx, names)
}

// Remove is the work of rmq.Schedules.Remove.
func (m *Manager) Remove(ctx context.Context, name string) error {
	if err := m.ready(name); err != nil {
		return err
	}
	return m.store.Remove(ctx, name)
}

// Pause is the work of rmq.Schedules.Pause.
func (m *Manager) Pause(ctx context.Context, name string) error {
	if err := m.ready(name); err != nil {
		return err
	}
	return m.store.Pause(ctx, name)
}

// Resume is the work of rmq.Schedules.Resume.
func (m *Manager) Resume(ctx context.Context, name string) error {
	if err := m.ready(name); err != nil {
		return err
	}
	return m.store.Resume(ctx, name)
}

// Trigger is the work of rmq.Schedules.Trigger; it also returns the topic
// the tick went to (for the observers).
func (m *Manager) Trigger(ctx context.Context, name string) (string, topic.Topic, error) {
	if err := m.ready(name); err != nil {
		return "", topic.Topic{}, err
	}
	return m.store.Trigger(ctx, name)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// maxCatchUpAge bounds Schedule.CatchUp.
const maxCatchUpAge = 100 * 365 * 24 * time.Hour

// check validates sc and returns what is stored of it.
func (m *Manager) check(sc Schedule) (Spec, Def, Message, error) {
	var none Spec
	if err := checkName(sc.Name); err != nil {
		return none, Def{}, Message{}, err
	}
	if sc.Topic.IsZero() {
		return none, Def{}, Message{}, invalid("zero Topic (use topic.New)")
	}
	msg := Message{Type: sc.Topic.Type()}
	switch sc.Topic.Type() {
	case topic.FixedTime:
		if sc.Priority != 0 {
			return none, Def{}, Message{}, invalid("priority %d on fixed-time topic %s", sc.Priority, sc.Topic.Name())
		}
	case topic.Priority:
		if sc.Priority < topic.MinPriority || sc.Priority > 1<<53 {
			return none, Def{}, Message{}, fmt.Errorf("%w: %w: %d (want %d <= priority <= 2^53)", ErrInvalid, producer.ErrInvalidPriority, sc.Priority, topic.MinPriority)
		}
		msg.Priority = sc.Priority
	default:
		return none, Def{}, Message{}, fmt.Errorf("%w: %w: topic %s is %s; ticks go to fixed-time or priority topics", ErrInvalid, producer.ErrTypeMismatch, sc.Topic.Name(), sc.Topic.Type())
	}
	if len(sc.Body) == 0 {
		return none, Def{}, Message{}, fmt.Errorf("%w: %w", ErrInvalid, producer.ErrEmptyBody)
	}
	if len(sc.Body) > m.maxBodySize {
		return none, Def{}, Message{}, fmt.Errorf("%w: %w: %d bytes (limit %d)", ErrInvalid, producer.ErrBodyTooLarge, len(sc.Body), m.maxBodySize)
	}
	msg.Body = sc.Body
	if sc.CatchUp < 0 || sc.CatchUp > maxCatchUpAge {
		return none, Def{}, Message{}, invalid("catch-up %v (want 0..100 years)", sc.CatchUp)
	}
	spec, err := Parse(sc.Spec, sc.Location)
	if err != nil {
		return none, Def{}, Message{}, err
	}
	locName, err := LocationName(sc.Location)
	if err != nil {
		return none, Def{}, Message{}, err
	}
	rec, err := producer.ParseRecurring(sc.Topic.Type(), sc.Options...)
	if err != nil {
		return none, Def{}, Message{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, taken := rec.Headers[HeaderName]; taken {
		return none, Def{}, Message{}, invalid("header %s is the schedule's own", HeaderName)
	}
	if len(rec.Headers) >= producer.MaxHeaders {
		return none, Def{}, Message{}, fmt.Errorf("%w: %w: %d headers and %s (limit %d)", ErrInvalid, producer.ErrInvalidHeaders, len(rec.Headers), HeaderName, producer.MaxHeaders)
	}
	headers := map[string]string{HeaderName: sc.Name}
	for k, v := range rec.Headers {
		headers[k] = v
	}
	o := scripts.Options{Headers: headers, TimeoutMs: int64((rec.Timeout + time.Millisecond - 1) / time.Millisecond)}
	if rec.MaxRetries >= 0 {
		o.MaxRetries, o.HasMaxRetries = rec.MaxRetries, true
	}
	msg.Options = scripts.EncodeOptions(o)
	msg.TTLMs = int64((rec.TTL + time.Millisecond - 1) / time.Millisecond)
	def := Def{Spec: sc.Spec, Location: locName, CatchUpMs: sc.CatchUp.Milliseconds()}
	return spec, def, msg, nil
}

// checkName accepts [A-Za-z0-9._-]{1,128}.
func checkName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return invalid("name of %d bytes (want 1..128)", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalid("name %q (want [A-Za-z0-9._-])", name)
		}
	}
	return nil
}
