package producer

import (
	"sync"
	"time"

	"github.com/rmq-go/rmq/internal/engine/clock"
)

// clockFresh is how long an estimate of Redis's clock serves sends before
// one of them asks send1.lua for Redis's clock again (every sendbatch.lua
// call returns it).
const clockFresh = 5 * time.Second

// sendClock is the producer's estimate of Redis's clock, the first-send
// time of the envelopes the producer packs: send1.lua reads no clock of its
// own while the estimate is fresh (a TIME call is a tenth of the script's
// cost), and sendbatch.lua packs no envelope of a packed group. The
// estimate is a lower bound taken from replies that carried Redis's clock,
// off by at most a round trip.
type sendClock struct {
	k  clock.RedisClock
	mu sync.Mutex
	at time.Time // when the estimate last took a reply; zero: never
}

// ms returns the estimate of Redis's ms now, and false when there is none
// or it is older than clockFresh.
func (c *sendClock) ms() (int64, bool) {
	c.mu.Lock()
	at := c.at
	c.mu.Unlock()
	if at.IsZero() || time.Since(at) > clockFresh {
		return 0, false
	}
	off, _, _ := c.k.Estimate()
	return (time.Now().UnixMicro() + off) / 1000, true
}

// observe folds in Redis's clock (µs) from a reply to a call sent at sent
// and answered at received.
func (c *sendClock) observe(redisUs int64, sent, received time.Time) {
	if redisUs <= 0 {
		return
	}
	c.k.Observe(redisUs, sent, received)
	c.mu.Lock()
	c.at = received
	c.mu.Unlock()
}
