package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// check refuses every bad part of a schedule with ErrInvalid, and with the
// producer's own sentinel where there is one; a good schedule passes.
func TestCheckRefuses(t *testing.T) {
	m := &Manager{maxBodySize: 8}
	fixed := topic.MustNew("ticks", topic.FixedTime, 4)
	prio := topic.MustNew("jobs", topic.Priority, 4)
	good := Schedule{Name: "nightly.report-1", Spec: "0 3 * * *", Topic: fixed, Body: []byte("run")}
	if _, _, _, err := m.check(good); err != nil {
		t.Fatalf("good schedule refused: %v", err)
	}
	with := func(f func(*Schedule)) Schedule { sc := good; f(&sc); return sc }
	for _, c := range []struct {
		name string
		sc   Schedule
		also error
	}{
		{"empty name", with(func(s *Schedule) { s.Name = "" }), nil},
		{"long name", with(func(s *Schedule) { s.Name = strings.Repeat("a", 129) }), nil},
		{"bad name byte", with(func(s *Schedule) { s.Name = "a/b" }), nil},
		{"zero topic", with(func(s *Schedule) { s.Topic = topic.Topic{} }), nil},
		{"priority on fixed-time", with(func(s *Schedule) { s.Priority = 3 }), nil},
		{"priority too high", with(func(s *Schedule) { s.Topic, s.Priority = prio, 1<<53+1 }), producer.ErrInvalidPriority},
		{"range-merge topic", with(func(s *Schedule) { s.Topic = topic.MustNew("rm", topic.RangeMerge, 4) }), producer.ErrTypeMismatch},
		{"empty body", with(func(s *Schedule) { s.Body = nil }), producer.ErrEmptyBody},
		{"large body", with(func(s *Schedule) { s.Body = []byte("123456789") }), producer.ErrBodyTooLarge},
		{"negative catch-up", with(func(s *Schedule) { s.CatchUp = -time.Second }), nil},
		{"bad spec", with(func(s *Schedule) { s.Spec = "every day" }), nil},
		{"own header", with(func(s *Schedule) {
			s.Options = []producer.SendOption{producer.WithHeaders(map[string]string{HeaderName: "x"})}
		}), nil},
	} {
		_, _, _, err := m.check(c.sc)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		if c.also != nil && !errors.Is(err, c.also) {
			t.Errorf("%s: %v, want also %v", c.name, err, c.also)
		}
	}
}
