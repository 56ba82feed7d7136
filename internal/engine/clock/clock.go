// Package clock holds the engine's estimates of Redis's clock, which
// decides what is due: Clock, one engine's offset, and RedisClock, the
// client's tightest bound from the replies of its calls; and NextBackoff,
// the pace of retries after failed calls.
package clock

import (
	"sync"
	"time"
)

// Clock estimates Redis's clock, which decides what is due. The estimate is
// a lower bound (the offset is taken against the time the reply arrived), so
// a fetcher that sleeps until a due score by it wakes a little late, never
// early, and never spins on a message Redis does not yet consider due.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Observe folds in one reading of Redis's time (µs) whose reply arrived at
// received.
func (k *Clock) Observe(redisUs int64, received time.Time) {
	if redisUs <= 0 {
		return
	}
	k.mu.Lock()
	k.offset = time.UnixMicro(redisUs).Sub(received)
	k.mu.Unlock()
}

// Now returns the estimate of Redis's current time.
func (k *Clock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Now().Add(k.offset)
}

// UntilMs returns how long until Redis's clock reaches ms.
func (k *Clock) UntilMs(ms int64) time.Duration {
	return time.UnixMilli(ms).Sub(k.Now())
}

// RedisClock estimates Redis's clock from replies that carry it: Redis
// read its clock at some instant between the call's send and its reply, so
// Redis − local lies in [redisUs − received, redisUs − sent]. The estimate
// is the largest lower bound seen (a lower bound: a fetcher sleeping by it
// wakes a little late, never early), hi the smallest upper bound, until a
// reply's interval does not meet [off, hi] (either clock was set): then it
// starts again from that reply.
type RedisClock struct {
	mu      sync.Mutex
	set     bool
	off, hi int64 // µs, Redis − local
}

// Observe folds one reply in and returns the estimate (µs).
func (k *RedisClock) Observe(redisUs int64, sent, received time.Time) int64 {
	lo := redisUs - received.UnixMicro()
	hi := redisUs - sent.UnixMicro()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.set || hi < k.off || lo > k.hi {
		k.off, k.hi, k.set = lo, hi, true
	}
	k.off, k.hi = max(k.off, lo), min(k.hi, hi)
	return k.off
}

// Estimate returns the estimate (µs) and how late by it a wake-up may be
// at most (its slack); ok is false before any reply.
func (k *RedisClock) Estimate() (off int64, slack time.Duration, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.off, time.Duration(k.hi-k.off) * time.Microsecond, k.set
}

// NextBackoff is the wait after a failed call that followed a wait of d:
// doubling, from 50ms up to 5s.
func NextBackoff(d time.Duration) time.Duration {
	return min(max(d*2, 50*time.Millisecond), 5*time.Second)
}
