package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Info is rmq.ScheduleInfo field for field, whose doc says what each field
// means: a stored schedule and what it did.
type Info struct {
	Schedule
	Message   producer.RecurringOptions
	Next      time.Time
	LastFired time.Time
	Fired     int64
	Skipped   int64
	UpdatedAt time.Time
}

// infos converts records read at Redis time now (the results of a store
// read, error included).
func infos(recs []Record, now time.Time, err error) ([]Info, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for _, rec := range recs {
		info, err := infoOf(rec, now)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// infoOf converts a stored schedule at Redis time now. A pending tick that
// is due has fired, though no scheduler may have rolled it yet.
func infoOf(rec Record, now time.Time) (Info, error) {
	loc, err := LoadLocation(rec.Def.Location)
	if err != nil {
		return Info{}, err
	}
	opts, err := scripts.DecodeOptions(rec.Message.Options)
	if err != nil && len(rec.Message.Options) > 0 {
		return Info{}, fmt.Errorf("rmq: schedule %s: %w", rec.Name, err)
	}
	ro := producer.RecurringOptions{MaxRetries: -1, TTL: time.Duration(rec.Message.TTLMs) * time.Millisecond, Timeout: time.Duration(opts.TimeoutMs) * time.Millisecond}
	if opts.HasMaxRetries {
		ro.MaxRetries = opts.MaxRetries
	}
	for k, v := range opts.Headers {
		if k != HeaderName {
			if ro.Headers == nil {
				ro.Headers = map[string]string{}
			}
			ro.Headers[k] = v
		}
	}
	st := rec.State
	info := Info{
		Schedule: Schedule{
			Name: rec.Name, Spec: rec.Def.Spec, Location: loc, Topic: rec.Topic, Body: rec.Message.Body,
			Options: ro.SendOptions(), CatchUp: time.Duration(rec.Def.CatchUpMs) * time.Millisecond, Paused: st.Paused,
		},
		Message: ro, Fired: st.Fired, Skipped: st.Skipped, UpdatedAt: time.UnixMilli(rec.Def.UpdatedMs),
	}
	if rec.Message.Type == topic.Priority {
		info.Priority = rec.Message.Priority
	}
	last := st.Last
	if st.Next > 0 {
		next := time.UnixMilli(st.Next)
		if !next.After(now) {
			info.Fired++
			last = max(last, st.Next)
			if spec, err := rec.Def.Parse(); err == nil {
				if next = spec.Next(next); !next.After(now) {
					next = spec.Next(now)
				}
			}
		}
		info.Next = next
	}
	if last > 0 {
		info.LastFired = time.UnixMilli(last)
	}
	return info, nil
}

// TickOf returns the instant of a priority tick from its message id,
// "<name>@<tick as Unix ms>".
func TickOf(id string) (time.Time, bool) {
	_, ms, found := strings.Cut(id, "@")
	v, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(v), true
}
