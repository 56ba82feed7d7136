package timerq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The queue hands out entries by time, moves a queued one when set again,
// and knows which are queued.
func TestQueueOrdersByTime(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	var q Queue[string]
	var a, b, c Timed[string]
	a.Init("a")
	b.Init("b")
	c.Init("c")
	assert.False(t, a.Queued())
	assert.Nil(t, q.Peek())

	assert.True(t, q.Set(&a, base.Add(3*time.Second)), "alone: first")
	assert.True(t, q.Set(&b, base.Add(time.Second)), "earlier: first")
	assert.False(t, q.Set(&c, base.Add(2*time.Second)), "between: not first")
	assert.True(t, a.Queued() && b.Queued() && c.Queued())

	// Moved later: c comes first now.
	assert.False(t, q.Set(&b, base.Add(4*time.Second)))
	var order []string
	for top := q.Peek(); top != nil; top = q.Peek() {
		order = append(order, top.V)
		q.Pop()
		assert.False(t, top.Queued(), "popped: not queued")
	}
	assert.Equal(t, []string{"c", "a", "b"}, order)

	// Removed: never handed out; removing an unqueued entry is a no-op.
	q.Set(&a, base)
	q.Set(&b, base.Add(time.Second))
	q.Remove(&a)
	q.Remove(&a)
	assert.False(t, a.Queued())
	require.NotNil(t, q.Peek())
	assert.Equal(t, "b", q.Peek().V)
	assert.Equal(t, base.Add(time.Second), q.Peek().At)
}
