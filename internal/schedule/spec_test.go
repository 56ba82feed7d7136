package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// ticks formats NextTicks' result as RFC 3339 with the zone offset.
func ticks(t *testing.T, spec string, loc *time.Location, from time.Time, n int) []string {
	t.Helper()
	got, err := NextTicks(spec, loc, from, n)
	require.NoError(t, err)
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.Format(time.RFC3339)
	}
	return out
}

func TestNextTicksAcrossDST(t *testing.T) {
	berlin, ny := mustLoad(t, "Europe/Berlin"), mustLoad(t, "America/New_York")
	cases := []struct {
		name string
		spec string
		loc  *time.Location
		from time.Time
		want []string
	}{
		// Berlin, 30 March 2025: 02:00 CET jumps to 03:00 CEST.
		{"berlin daily in the skipped hour fires at its end", "30 2 * * *", berlin, time.Date(2025, 3, 28, 12, 0, 0, 0, berlin),
			[]string{"2025-03-29T02:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"}},
		{"berlin every 20 minutes over the gap", "*/20 * * * *", berlin, time.Date(2025, 3, 30, 1, 30, 0, 0, berlin),
			[]string{"2025-03-30T01:40:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T03:20:00+02:00"}},
		{"berlin hourly over the gap", "0 * * * *", berlin, time.Date(2025, 3, 30, 0, 30, 0, 0, berlin),
			[]string{"2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T04:00:00+02:00"}},
		// Berlin, 26 October 2025: 03:00 CEST goes back to 02:00 CET.
		{"berlin daily in the repeated hour fires once", "30 2 * * *", berlin, time.Date(2025, 10, 25, 12, 0, 0, 0, berlin),
			[]string{"2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"}},
		{"berlin hourly over the repeated hour", "0 * * * *", berlin, time.Date(2025, 10, 26, 0, 30, 0, 0, berlin),
			[]string{"2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00", "2025-10-26T03:00:00+01:00", "2025-10-26T04:00:00+01:00"}},
		// New York, 9 March 2025: 02:00 EST jumps to 03:00 EDT.
		{"new york daily in the skipped hour", "CRON_TZ=America/New_York 15 2 * * *", nil, time.Date(2025, 3, 8, 12, 0, 0, 0, ny),
			[]string{"2025-03-09T03:00:00-04:00", "2025-03-10T02:15:00-04:00"}},
		// New York, 2 November 2025: 02:00 EDT goes back to 01:00 EST.
		{"new york daily in the repeated hour", "30 1 * * *", ny, time.Date(2025, 11, 1, 12, 0, 0, 0, ny),
			[]string{"2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"}},
		{"new york with seconds, from the second pass of the repeated hour", "0 45 1 * * *", ny, time.Date(2025, 11, 2, 1, 10, 0, 0, time.FixedZone("EST", -5*3600)),
			[]string{"2025-11-03T01:45:00-05:00"}},
		{"a CRON_TZ prefix wins over the location", "CRON_TZ=America/New_York 0 9 * * *", berlin, time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
			[]string{"2025-06-01T09:00:00-04:00"}},
		{"@every is real time across the change", "@every 30m", berlin, time.Date(2025, 3, 30, 1, 15, 0, 0, berlin),
			[]string{"2025-03-30T01:45:00+01:00", "2025-03-30T03:15:00+02:00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ticks(t, c.spec, c.loc, c.from, len(c.want))
			// Compare instants, printed in the location the wants are in.
			for i := range got {
				g, _ := time.Parse(time.RFC3339, got[i])
				w, _ := time.Parse(time.RFC3339, c.want[i])
				assert.True(t, g.Equal(w), "tick %d: got %s, want %s", i, got[i], c.want[i])
			}
			assert.Len(t, got, len(c.want))
		})
	}
}

func TestNextTicksSpecs(t *testing.T) {
	from := time.Date(2025, 1, 1, 0, 0, 0, 500, time.UTC)
	assert.Equal(t, []string{"2025-01-01T00:00:01Z", "2025-01-01T00:00:02Z"}, ticks(t, "* * * * * *", nil, from, 2))
	assert.Equal(t, []string{"2025-01-01T00:01:30Z", "2025-01-01T00:03:00Z"}, ticks(t, "@every 90s", nil, from, 2))
	assert.Equal(t, []string{"2025-01-02T00:00:00Z"}, ticks(t, "@daily", nil, from, 1))
	assert.Equal(t, []string{"2025-01-01T01:00:00Z"}, ticks(t, "@hourly", nil, from, 1))
	assert.Equal(t, []string{"2025-01-05T00:00:00Z"}, ticks(t, "@weekly", nil, from, 1), "weekly is Sunday")
	assert.Equal(t, []string{"2025-02-01T00:00:00Z"}, ticks(t, "@monthly", nil, from, 1))
	assert.Equal(t, []string{"2026-01-01T00:00:00Z"}, ticks(t, "@yearly", nil, from, 1))
	assert.Equal(t, []string{"2025-01-01T02:00:00Z", "2025-01-01T14:00:00Z"}, ticks(t, "0 2,14 * * *", nil, from, 2))
}

func TestParseRefuses(t *testing.T) {
	for _, spec := range []string{"", "   ", "* * *", "61 * * * *", "@every 500ms", "@every 1.5s", "@every 0s", "@every -1s", "@fortnightly",
		"CRON_TZ=Nowhere/City 0 * * * *", "CRON_TZ=Europe/Berlin", "TZ=Local 0 * * * *", "0 0 30 2 *"} {
		_, err := Parse(spec, nil)
		assert.True(t, errors.Is(err, ErrInvalid), "%q: %v", spec, err)
	}
	_, err := Parse("0 * * * *", time.Local)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = Parse("0 * * * *", time.FixedZone("X", 3600))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = NextTicks("0 * * * *", nil, time.Now(), -1)
	assert.ErrorIs(t, err, ErrInvalid)
}
