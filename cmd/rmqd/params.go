package main

import (
	"math"
	"net/url"
	"strconv"
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
)

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
