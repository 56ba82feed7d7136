package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The clock estimate is the best lower bound of Redis − local that the
// replies tell, never above the truth while the clocks keep their pace;
// a reply that contradicts it (a clock was set) starts it again.
func TestRedisClockKeepsTightestLowerBound(t *testing.T) {
	var k RedisClock
	base := time.Unix(1_800_000_000, 0)
	const truth = 5_000 // µs: Redis runs 5 ms ahead
	reply := func(sentAt, tookUs, execAtUs int64) int64 {
		sent := base.Add(time.Duration(sentAt) * time.Microsecond)
		received := sent.Add(time.Duration(tookUs) * time.Microsecond)
		redisUs := sent.UnixMicro() + execAtUs + truth
		return k.Observe(redisUs, sent, received)
	}
	// A slow reply (a large fetch, read at its start): loose.
	assert.EqualValues(t, truth-9_000, reply(0, 10_000, 1_000))
	_, slack, ok := k.Estimate()
	require.True(t, ok)
	assert.Equal(t, 10*time.Millisecond, slack)
	// A quick one tightens it; a later slow one does not loosen it.
	assert.EqualValues(t, truth-100, reply(50_000, 200, 100))
	assert.EqualValues(t, truth-100, reply(90_000, 30_000, 0))
	_, slack, _ = k.Estimate()
	assert.LessOrEqual(t, slack, 200*time.Microsecond)
	// Redis's clock set back by a second: the next reply contradicts the
	// estimate, which starts again from it.
	sent := base.Add(time.Second)
	got := k.Observe(sent.UnixMicro()+truth-1_000_000+50, sent, sent.Add(100*time.Microsecond))
	assert.EqualValues(t, truth-1_000_000-50, got)
}
