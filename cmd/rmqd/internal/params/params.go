package params

import (
	"math"
	"net/url"
	"strconv"
	"time"
)

// Limits of the query parameters (LMSTFY-API.md §9).
const (
	MaxUint32   = math.MaxUint32
	MaxTries    = math.MaxUint16
	MaxCount    = 100
	MaxBulkJobs = 64
	MaxJobSize  = 1 << 20 // bytes, inclusive
	MaxAttrs    = 16
	MaxAttrName = 32
	MaxAttrVal  = 128

	DefaultTTL   = 86400 // s
	DefaultTries = 1
	DefaultTTR   = 120 // s

	// MaxTTR is the longest lease a consume may ask for (the library's
	// limit). lmstfy takes any uint32; rmqd answers a longer one 400
	// rather than cut it, so a client never holds a lease shorter than it
	// believes.
	MaxTTR = 86400 // s
	// maxAtPast is how far in the past an absolute due time (?at=, an RMQ
	// extension) may be: a time a little in the past (a clock behind, a
	// slow request) means "now"; one further back is a mistake (a zero
	// or uninitialised time, a unit error) and answers 400.
	maxAtPast = 24 * time.Hour
	// MaxSpan is the longest ttl or delay in seconds: the library's bound
	// on a message's expiry and due range (100 years). lmstfy takes any
	// uint32 (136 years); a larger one answers 400 here rather than 500
	// from the library.
	MaxSpan = 100 * 365 * 24 * 3600
)

// The 400 texts of the bounds, prefixed like lmstfy's so that a client
// matching "invalid ttr" still does.
const (
	ErrTTRTooLong = "invalid ttr: at most 86400 (24 h)"
	ErrAtTooEarly = "invalid at: more than 24 h in the past"
	ErrAtTooLate  = "invalid at: more than 4294967295 s ahead"
	ErrTTLTooLong = "invalid ttl: at most 3153600000 (100 years)"
	errDelayLong  = "invalid delay: at most 3153600000 s (100 years)"
)

// ParseAt reads ?at= (RFC 3339, RMQ's absolute due time) at now. A time
// not after now, within maxAtPast, is due now and keeps publish order:
// at and delay are zero, as for delay=0 (a job with at=1970-01-01 must not
// jump ahead of every job waiting). A later time gives at and the delay
// until it. bad is the 400 text, or "".
func ParseAt(s string, now time.Time) (at time.Time, delay time.Duration, bad string) {
	t, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		return time.Time{}, 0, "invalid at"
	case t.Before(now.Add(-maxAtPast)):
		return time.Time{}, 0, ErrAtTooEarly
	case t.After(now.Add(MaxUint32 * time.Second)):
		return time.Time{}, 0, ErrAtTooLate
	case !t.After(now):
		return time.Time{}, 0, ""
	}
	return t, t.Sub(now), ""
}

// QueryUint reads an unsigned decimal parameter no larger than max. An
// absent parameter gives def; a present one must be digits only: empty, a
// sign, a fraction or junk is invalid (ok false), as in lmstfy.
func QueryUint(q url.Values, name string, def, max uint64) (v uint64, ok bool) {
	vals, present := q[name]
	if !present {
		return def, true
	}
	s := vals[0]
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > max {
		return 0, false
	}
	return v, true
}
