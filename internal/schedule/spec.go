// Package schedule is the engine of rmq's schedules: the cron and interval
// specs, the Redis layout of a schedule and its pending tick, the calls of
// schedule.lua, and the scheduler that rolls schedules forward. Package rmq
// holds the public API and converts at the edge.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalid is what every refusal of this package wraps; rmq maps it to
// rmq.ErrInvalidSchedule.
var ErrInvalid = errors.New("rmq: invalid schedule")

// parser reads "m h dom mon dow", the same with a leading seconds field,
// and the descriptors (@daily, @every 90s, ...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed schedule spec in its location.
type Spec struct {
	every time.Duration      // @every: real-time interval, whole seconds
	cron  *cron.SpecSchedule // otherwise: fields matched on wall-clock time in UTC
	loc   *time.Location
}

// Location returns where the spec's wall-clock fields are read.
func (s Spec) Location() *time.Location { return s.loc }

// LocationName returns the name Parse accepts back for a location: "" for
// UTC, else its IANA name. A location no other process could load the same
// way (time.Local, a time.FixedZone) is refused.
func LocationName(loc *time.Location) (string, error) {
	if loc == nil || loc == time.UTC {
		return "", nil
	}
	name := loc.String()
	if name == "UTC" {
		return "", nil
	}
	if name == "Local" || name == "" {
		return "", fmt.Errorf("%w: location %q is this machine's: give an IANA name (time.LoadLocation)", ErrInvalid, name)
	}
	if _, err := time.LoadLocation(name); err != nil {
		return "", fmt.Errorf("%w: location %q cannot be loaded by name: %v", ErrInvalid, name, err)
	}
	return name, nil
}

// LoadLocation is time.LoadLocation of a name LocationName returned.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf("%w: location %q: %v", ErrInvalid, name, err)
	}
	return loc, nil
}

// Parse reads spec in loc (nil: UTC); a "CRON_TZ=Area/City " (or "TZ=")
// prefix in spec wins over loc. An @every interval must be whole seconds,
// at least one; a spec that never fires within five years is refused.
func Parse(spec string, loc *time.Location) (Spec, error) {
	if loc == nil {
		loc = time.UTC
	}
	body := strings.TrimSpace(spec)
	if body == "" {
		return Spec{}, fmt.Errorf("%w: empty spec", ErrInvalid)
	}
	if strings.HasPrefix(body, "TZ=") || strings.HasPrefix(body, "CRON_TZ=") {
		name, rest, ok := strings.Cut(body[strings.IndexByte(body, '=')+1:], " ")
		if !ok || strings.TrimSpace(rest) == "" {
			return Spec{}, fmt.Errorf("%w: %q: a time zone prefix needs a spec after it", ErrInvalid, spec)
		}
		l, err := LoadLocation(name)
		if err != nil {
			return Spec{}, fmt.Errorf("%w: spec %q", err, spec)
		}
		loc, body = l, strings.TrimSpace(rest)
	}
	if _, err := LocationName(loc); err != nil {
		return Spec{}, err
	}
	if d, ok := strings.CutPrefix(body, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return Spec{}, fmt.Errorf("%w: %q: @every takes a whole number of seconds, at least 1s", ErrInvalid, spec)
		}
		return Spec{every: every, loc: loc}, nil
	}
	// The fields are matched on wall-clock time: parsed in UTC, where every
	// wall time exists once, and mapped to instants in loc by wallInstant.
	sch, err := parser.Parse("CRON_TZ=UTC " + body)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %q: %v", ErrInvalid, spec, err)
	}
	cs, ok := sch.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q", ErrInvalid, spec)
	}
	s := Spec{cron: cs, loc: loc}
	if s.Next(time.Now()).IsZero() {
		return Spec{}, fmt.Errorf("%w: %q never fires", ErrInvalid, spec)
	}
	return s, nil
}

// Next returns the first tick after from (zero if none within five years).
//
// Cron fields follow wall-clock time in the spec's location, and each wall
// time that matches fires exactly once:
//   - a wall time that does not exist (the hour skipped when clocks go
//     forward) fires at the first instant after the gap, once however many
//     matching wall times fell in it;
//   - a wall time that occurs twice (the hour repeated when clocks go back)
//     fires at its first occurrence only.
//
// An @every interval is real time: from plus the interval, on the second.
func (s Spec) Next(from time.Time) time.Time {
	if s.every > 0 {
		return from.Truncate(time.Second).Add(s.every)
	}
	w := wallOf(from.In(s.loc))
	for range 1000 {
		w = s.cron.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		// The wall time of an instant in a repeated hour's second pass
		// maps back to its first pass, which is not after from: that wall
		// time fired already.
		if at := wallInstant(w, s.loc); at.After(from) {
			return at
		}
	}
	return time.Time{}
}

// wallOf returns t's wall clock as the same reading in UTC.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// wallInstant returns the instant at which the clocks of loc read w (a wall
// time given in UTC): the first of two in a repeated hour, the end of the
// gap for a wall time skipped by a jump forward.
func wallInstant(w time.Time, loc *time.Location) time.Time {
	// Every offset in force within a day of w: the instant, if any, is w
	// minus one of them.
	var offsets []int
	for _, d := range []time.Duration{-26 * time.Hour, -13 * time.Hour, 0, 13 * time.Hour, 26 * time.Hour} {
		_, off := w.Add(d).In(loc).Zone()
		if !containsInt(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	var best time.Time
	for _, off := range offsets {
		at := w.Add(-time.Duration(off) * time.Second).In(loc)
		if wallOf(at).Equal(w) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: the clock jumps past w at the start of a zone period; the
	// earliest such start whose reading is past w is the gap's end.
	for _, off := range offsets {
		start, _ := w.Add(-time.Duration(off) * time.Second).In(loc).ZoneBounds()
		if start.IsZero() || !wallOf(start).After(w) || !wallOf(start.Add(-time.Second)).Before(w) {
			continue
		}
		if best.IsZero() || start.Before(best) {
			best = start
		}
	}
	if best.IsZero() {
		// Not reachable with real zone data; never earlier than the wall time read at the smallest offset.
		best = w.Add(-time.Duration(offsets[0]) * time.Second)
	}
	return best.In(loc)
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// NextTicks returns the n ticks of spec after from.
func NextTicks(spec string, loc *time.Location, from time.Time, n int) ([]time.Time, error) {
	s, err := Parse(spec, loc)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: n = %d", ErrInvalid, n)
	}
	out := make([]time.Time, 0, n)
	t := from
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out, nil
}
