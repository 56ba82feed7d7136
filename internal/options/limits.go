package options

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits are a topic's fleet-wide flow limits (consumer.WithRateLimit,
// WithGlobalConcurrency, WithGroupConcurrency, WithGroupRateLimit). They
// are stored with the topic (keyspace.LimitsKey): every consumer of the topic
// obeys the stored ones, so processes cannot disagree. Zero fields are no
// limit.
type Limits struct {
	Rate             int           // starts per RatePer, topic-wide
	RatePer          time.Duration //
	Concurrency      int           // deliveries in flight, topic-wide
	GroupConcurrency int           // deliveries in flight of one group
	GroupRate        int           // starts of one group per GroupRatePer
	GroupRatePer     time.Duration //
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Groups reports whether l limits groups.
func (l Limits) Groups() bool { return l.GroupConcurrency > 0 || l.GroupRate > 0 }

// String is the stored form: "rate=50/1s conc=5 gconc=1 grate=2/1s"
// (fields without a limit left out; "" for none).
func (l Limits) String() string {
	var parts []string
	if l.Rate > 0 {
		parts = append(parts, "rate="+strconv.Itoa(l.Rate)+"/"+l.RatePer.String())
	}
	if l.Concurrency > 0 {
		parts = append(parts, "conc="+strconv.Itoa(l.Concurrency))
	}
	if l.GroupConcurrency > 0 {
		parts = append(parts, "gconc="+strconv.Itoa(l.GroupConcurrency))
	}
	if l.GroupRate > 0 {
		parts = append(parts, "grate="+strconv.Itoa(l.GroupRate)+"/"+l.GroupRatePer.String())
	}
	return strings.Join(parts, " ")
}

// ParseLimits reads the stored form (String).
func ParseLimits(s string) (Limits, error) {
	var l Limits
	rate := func(v string) (int, time.Duration, error) {
		n, per, ok := strings.Cut(v, "/")
		if !ok {
			return 0, 0, fmt.Errorf("rate %q: want n/duration", v)
		}
		c, err := strconv.Atoi(n)
		if err != nil {
			return 0, 0, err
		}
		d, err := time.ParseDuration(per)
		return c, d, err
	}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "rate":
			l.Rate, l.RatePer, err = rate(v)
		case "conc":
			l.Concurrency, err = strconv.Atoi(v)
		case "gconc":
			l.GroupConcurrency, err = strconv.Atoi(v)
		case "grate":
			l.GroupRate, l.GroupRatePer, err = rate(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return Limits{}, fmt.Errorf("rmq: stored limits %q: %w", s, err)
		}
	}
	return l, nil
}

// Check validates l: counts at least 1 where set, periods of 1ms..24h.
func (l Limits) Check() error {
	rate := func(what string, n int, per time.Duration) error {
		if n == 0 && per == 0 {
			return nil
		}
		if n < 1 || n > 1e9 || per < time.Millisecond || per > 24*time.Hour {
			return fmt.Errorf("%s %d per %v (want 1..1e9 per 1ms..24h)", what, n, per)
		}
		return nil
	}
	if err := rate("rate limit", l.Rate, l.RatePer); err != nil {
		return err
	}
	if err := rate("group rate limit", l.GroupRate, l.GroupRatePer); err != nil {
		return err
	}
	if l.Concurrency < 0 || l.GroupConcurrency < 0 {
		return fmt.Errorf("concurrency %d / group concurrency %d (want at least 1, or 0 for none)", l.Concurrency, l.GroupConcurrency)
	}
	return nil
}

// RateBurst is how many starts a rate of n per period lets go at once
// after a pause: a tenth of n, at least 1. In any window of one period at
// most n + burst start.
func RateBurst(n int) int { return max(1, (n+9)/10) }

// GCRA returns a rate of n per per as a GCRA's interval between starts
// and its tolerance, in µs (0, 0 for none).
func GCRA(n int, per time.Duration) (iv, tol float64) {
	if n <= 0 || per <= 0 {
		return 0, 0
	}
	iv = float64(per.Microseconds()) / float64(n)
	return iv, float64(RateBurst(n)-1) * iv
}
