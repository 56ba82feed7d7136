package rmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"
)

// requireNotTakenBefore watches tp's message key until 20 ms before due
// (the margin is for the clocks of the test and of Redis) and fails as
// soon as the message shows in its slot's prepare set: taken before its
// instant. Nothing signals a take that does not happen, so the watch
// lasts until the instant, which is the behaviour under test.
func (e *env) requireNotTakenBefore(t *testing.T, tp topic.Topic, key string, due time.Time, msgAndArgs ...any) {
	t.Helper()
	k := e.keys(tp, slotOfKey(tp, key))
	taken := func() bool {
		// Any answer but "not there" (a failed call too) fails the watch.
		return !errors.Is(e.rdb.ZScore(context.Background(), k.Prepare, key).Err(), redis.Nil)
	}
	require.Never(t, taken, time.Until(due)-20*time.Millisecond, 5*time.Millisecond, msgAndArgs...)
}
