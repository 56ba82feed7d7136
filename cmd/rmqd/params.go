package main

import (
	"math"
	"net/url"
	"strconv"
	"time"
)

// Limits of the query parameters (LMSTFY-API.md §9).
const (
	maxUint32   = math.MaxUint32
	maxTries    = math.MaxUint16
	maxCount    = 100
	maxBulkJobs = 64
	maxJobSize  = 1 << 20 // bytes, inclusive
	maxAttrs    = 16
	maxAttrName = 32
	maxAttrVal  = 128

	defaultTTL   = 86400 // s
	defaultTries = 1
	defaultTTR   = 120 // s

	// maxTTR is the longest lease a consume may ask for (the library's
	// limit). lmstfy takes any uint32; rmqd answers a longer one 400
	// rather than cut it, so a client never holds a lease shorter than it
	// believes.
	maxTTR = 86400 // s
	// maxAtPast is how far in the past an absolute due time (?at=, an RMQ
	// extension) may be: a time a little in the past (a clock behind, a
	// slow request) means "now"; one further back is a mistake (a zero
	// or uninitialised time, a unit error) and answers 400.
	maxAtPast = 24 * time.Hour
	// maxSpan is the longest ttl or delay in seconds: the library's bound
	// on a message's expiry and due range (100 years). lmstfy takes any
	// uint32 (136 years); a larger one answers 400 here rather than 500
	// from the library.
	maxSpan = 100 * 365 * 24 * 3600
)

// The 400 texts of the bounds, prefixed like lmstfy's so that a client
// matching "invalid ttr" still does.
const (
	errTTRTooLong = "invalid ttr: at most 86400 (24 h)"
	errAtTooEarly = "invalid at: more than 24 h in the past"
	errAtTooLate  = "invalid at: more than 4294967295 s ahead"
	errTTLTooLong = "invalid ttl: at most 3153600000 (100 years)"
	errDelayLong  = "invalid delay: at most 3153600000 s (100 years)"
)

// parseAt reads ?at= (RFC 3339, RMQ's absolute due time) at now. A time
// not after now, within maxAtPast, is due now and keeps publish order:
// at and delay are zero, as for delay=0 (a job with at=1970-01-01 must not
// jump ahead of every job waiting). A later time gives at and the delay
// until it. bad is the 400 text, or "".
func parseAt(s string, now time.Time) (at time.Time, delay time.Duration, bad string) {
	t, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		return time.Time{}, 0, "invalid at"
	case t.Before(now.Add(-maxAtPast)):
		return time.Time{}, 0, errAtTooEarly
	case t.After(now.Add(maxUint32 * time.Second)):
		return time.Time{}, 0, errAtTooLate
	case !t.After(now):
		return time.Time{}, 0, ""
	}
	return t, t.Sub(now), ""
}

// queryUint reads an unsigned decimal parameter no larger than max. An
// absent parameter gives def; a present one must be digits only: empty, a
// sign, a fraction or junk is invalid (ok false), as in lmstfy.
func queryUint(q url.Values, name string, def, max uint64) (v uint64, ok bool) {
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
