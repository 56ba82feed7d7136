package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// ErrNotFound is returned for a name with no schedule; rmq maps it to
// rmq.ErrScheduleNotFound.
var ErrNotFound = errors.New("rmq: schedule not found")

// Def is what the definition HASH keeps of a schedule (JSON): what the Go
// side plans ticks from and shows.
type Def struct {
	Spec      string `json:"spec"`
	Location  string `json:"tz,omitempty"` // "" for UTC
	CatchUpMs int64  `json:"catch_up_ms,omitempty"`
	UpdatedMs int64  `json:"updated_ms"` // Redis time of the last Set
}

// Record is a stored schedule as read back.
type Record struct {
	Name    string
	Topic   topic.Topic
	Def     Def
	Message Message
	State   State
}

// Store reads and changes the schedules under one prefix.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	wakeCmd string
}

// NewStore returns the schedules of prefix on rdb.
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix, wakeCmd: scripts.WakeCommand(rdb)}
}

// run calls schedule.lua on slot index of t.
func (s *Store) run(ctx context.Context, t topic.Topic, index int, op string, args ...any) *redis.Cmd {
	a := append([]any{op, s.wakeCmd, EventsChannel(s.prefix), eventPrefix(t, index)}, args...)
	return scripts.Schedule.Run(ctx, s.rdb, KeysOf(s.prefix, t, index).list(), a...)
}

// redisNow reads Redis's clock: ticks are planned on the clock that fires
// them.
func (s *Store) redisNow(ctx context.Context) (time.Time, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("rmq: read Redis time: %w", err)
	}
	return now, nil
}

// lookup returns the registration of name.
func (s *Store) lookup(ctx context.Context, name string) (Registration, error) {
	raw, err := s.rdb.HGet(ctx, RegistryKey(s.prefix), name).Result()
	if errors.Is(err, redis.Nil) {
		return Registration{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return Registration{}, fmt.Errorf("rmq: schedule %s: %w", name, err)
	}
	return decodeRegistration(raw)
}

func newGen() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Put creates or replaces the schedule name on t; paused ones get no
// pending tick. Everything was validated: this only writes. Order, so that
// a crash half way never leaves two copies (the scheduler also removes a
// copy its registration does not name): the old copy on another topic goes
// first, then the registration, then the copy itself.
func (s *Store) Put(ctx context.Context, name string, t topic.Topic, d Def, m Message, spec Spec, paused bool) error {
	old, err := s.lookup(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case old.Topic.Name() != t.Name():
		if _, err := s.removeFrom(ctx, old.Topic, name, ""); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	gen := newGen()
	if err := s.rdb.HSet(ctx, RegistryKey(s.prefix), name, Registration{Topic: t, Gen: gen}.encode()).Err(); err != nil {
		return fmt.Errorf("rmq: set schedule %s: %w", name, err)
	}
	rec := m.encode()
	return s.planned(ctx, func(now time.Time) *redis.Cmd {
		var first int64
		if !paused {
			first = spec.Next(now).UnixMilli()
		}
		d.UpdatedMs = now.UnixMilli()
		def, _ := json.Marshal(d)
		return s.run(ctx, t, SlotOf(name, t), "set", name, gen, first, scripts.Nonce(), def, rec)
	})
}

// planned runs a call whose first tick is planned from Redis's clock,
// again from the clock the script saw when that tick was no longer ahead
// of it (the call took longer than the time left).
func (s *Store) planned(ctx context.Context, call func(now time.Time) *redis.Cmd) error {
	now, err := s.redisNow(ctx)
	if err != nil {
		return err
	}
	for range 5 {
		res, err := call(now).Int64Slice()
		if err != nil {
			return fmt.Errorf("rmq: schedule: %w", err)
		}
		switch res[0] {
		case 0:
			return ErrNotFound
		case -1:
			now = time.UnixMilli(res[1])
			continue
		}
		return nil
	}
	return errors.New("rmq: schedule: the next tick kept passing before it could be sent")
}

// Pause stops the schedule name: its pending tick is removed if not due.
func (s *Store) Pause(ctx context.Context, name string) error {
	reg, err := s.lookup(ctx, name)
	if err != nil {
		return err
	}
	res, err := s.run(ctx, reg.Topic, SlotOf(name, reg.Topic), "pause", name).Int64Slice()
	if err != nil {
		return fmt.Errorf("rmq: pause schedule %s: %w", name, err)
	}
	if res[0] == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return nil
}

// Resume restarts a paused schedule from its next tick after now.
func (s *Store) Resume(ctx context.Context, name string) error {
	rec, _, err := s.Get(ctx, name)
	if err != nil {
		return err
	}
	if !rec.State.Paused {
		return nil
	}
	sp, err := rec.Def.Parse()
	if err != nil {
		return err
	}
	err = s.planned(ctx, func(now time.Time) *redis.Cmd {
		return s.run(ctx, rec.Topic, SlotOf(name, rec.Topic), "resume", name, sp.Next(now).UnixMilli(), scripts.Nonce())
	})
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return err
}

// Remove deletes the schedule name and its pending tick (if not due).
func (s *Store) Remove(ctx context.Context, name string) error {
	reg, err := s.lookup(ctx, name)
	if err != nil {
		return err
	}
	gen, err := s.removeFrom(ctx, reg.Topic, name, "")
	if err != nil {
		return err
	}
	return s.unregister(ctx, name, gen)
}

// removeFrom removes name's copy on t if its generation is gen (any when
// ""), and returns the generation removed.
func (s *Store) removeFrom(ctx context.Context, t topic.Topic, name, gen string) (string, error) {
	res, err := s.run(ctx, t, SlotOf(name, t), "remove", name, gen).Slice()
	if err != nil {
		return "", fmt.Errorf("rmq: remove schedule %s: %w", name, err)
	}
	if code, _ := res[0].(int64); code == 0 {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	g, _ := res[1].(string)
	return g, nil
}

// unregister deletes name's registration if it is still of generation gen:
// a Set that came meanwhile keeps its own.
func (s *Store) unregister(ctx context.Context, name, gen string) error {
	if err := scripts.ScheduleReg.Run(ctx, s.rdb, []string{RegistryKey(s.prefix)}, name, gen).Err(); err != nil {
		return fmt.Errorf("rmq: remove schedule %s: %w", name, err)
	}
	return nil
}

// Trigger sends one extra tick of name now and returns its message id and
// topic.
func (s *Store) Trigger(ctx context.Context, name string) (string, topic.Topic, error) {
	reg, err := s.lookup(ctx, name)
	if err != nil {
		return "", topic.Topic{}, err
	}
	res, err := s.run(ctx, reg.Topic, SlotOf(name, reg.Topic), "trigger", name, scripts.Nonce()).Slice()
	if err != nil {
		return "", topic.Topic{}, fmt.Errorf("rmq: trigger schedule %s: %w", name, err)
	}
	if code, _ := res[0].(int64); code == 0 {
		return "", topic.Topic{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	id, _ := res[1].(string)
	return id, reg.Topic, nil
}

// Get reads the schedule name, with Redis's clock at the read.
func (s *Store) Get(ctx context.Context, name string) (Record, time.Time, error) {
	reg, err := s.lookup(ctx, name)
	if err != nil {
		return Record{}, time.Time{}, err
	}
	recs, now, err := s.read(ctx, map[string]Registration{name: reg})
	if err != nil {
		return Record{}, time.Time{}, err
	}
	if len(recs) == 0 {
		return Record{}, time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return recs[0], now, nil
}

// List reads every schedule, by name, with Redis's clock at the read.
func (s *Store) List(ctx context.Context) ([]Record, time.Time, error) {
	all, err := s.rdb.HGetAll(ctx, RegistryKey(s.prefix)).Result()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("rmq: list schedules: %w", err)
	}
	regs := make(map[string]Registration, len(all))
	for name, raw := range all {
		if reg, err := decodeRegistration(raw); err == nil {
			regs[name] = reg
		}
	}
	return s.read(ctx, regs)
}

// read reads the copies the registrations name, in one pipeline; a
// registration without its copy (a Set or Remove under way) is left out.
func (s *Store) read(ctx context.Context, regs map[string]Registration) ([]Record, time.Time, error) {
	type cmds struct{ state, def, msg *redis.StringCmd }
	pipe := s.rdb.Pipeline()
	timeCmd := pipe.Time(ctx)
	byName := make(map[string]cmds, len(regs))
	for name, reg := range regs {
		k := KeysOf(s.prefix, reg.Topic, SlotOf(name, reg.Topic))
		byName[name] = cmds{pipe.HGet(ctx, k.State, name), pipe.HGet(ctx, k.Def, name), pipe.HGet(ctx, k.Msg, name)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, time.Time{}, fmt.Errorf("rmq: read schedules: %w", err)
	}
	out := make([]Record, 0, len(regs))
	for name, c := range byName {
		if c.state.Err() != nil || c.def.Err() != nil || c.msg.Err() != nil {
			continue
		}
		rec := Record{Name: name, Topic: regs[name].Topic}
		var err error
		if rec.State, err = parseState(c.state.Val()); err != nil {
			return nil, time.Time{}, err
		}
		if err := json.Unmarshal([]byte(c.def.Val()), &rec.Def); err != nil {
			return nil, time.Time{}, fmt.Errorf("rmq: schedule %s: malformed definition: %w", name, err)
		}
		if rec.Message, err = decodeMessage([]byte(c.msg.Val())); err != nil {
			return nil, time.Time{}, err
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, timeCmd.Val(), nil
}
