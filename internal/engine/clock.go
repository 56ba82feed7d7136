package engine

import (
	"sync"
	"time"
)

// clock estimates Redis's clock, which decides what is due. The estimate is
// a lower bound (the offset is taken against the time the reply arrived), so
// a fetcher that sleeps until a due score by it wakes a little late, never
// early, and never spins on a message Redis does not yet consider due.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (k *clock) observe(redisUs int64, received time.Time) {
	if redisUs <= 0 {
		return
	}
	k.mu.Lock()
	k.offset = time.UnixMicro(redisUs).Sub(received)
	k.mu.Unlock()
}

// now returns the estimate of Redis's current time.
func (k *clock) now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Now().Add(k.offset)
}

// untilMs returns how long until Redis's clock reaches ms.
func (k *clock) untilMs(ms int64) time.Duration {
	return time.UnixMilli(ms).Sub(k.now())
}
