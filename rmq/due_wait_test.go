package rmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// waitAllDue waits until every message waiting in the store of tp (a
// time-based topic) is due by Redis's clock: the scripts round a due time
// up to the next millisecond, so a message sent "now" comes due a moment
// after its send.
func (e *env) waitAllDue(tp topic.Topic) {
	e.t.Helper()
	ctx := context.Background()
	redistest.Poll(e.t, func() error {
		now, err := e.rdb.Time(ctx).Result()
		require.NoError(e.t, err)
		for s := range tp.SlotAmount() {
			last, err := e.rdb.ZRangeWithScores(ctx, e.keys(tp, s).Store, -1, -1).Result()
			require.NoError(e.t, err)
			if len(last) == 1 && int64(last[0].Score) > now.UnixMilli() {
				return fmt.Errorf("slot %d: %s due at %d ms, Redis's clock at %d ms", s, last[0].Member, int64(last[0].Score), now.UnixMilli())
			}
		}
		return nil
	})
}

// waitRedisPast waits until Redis's clock, which the scripts read, is past
// at: the event a test of an expiry or a due time waits for.
func (e *env) waitRedisPast(at time.Time) {
	e.t.Helper()
	redistest.Poll(e.t, func() error {
		now, err := e.rdb.Time(context.Background()).Result()
		require.NoError(e.t, err)
		if !now.After(at) {
			return fmt.Errorf("Redis's clock at %v, not past %v", now, at)
		}
		return nil
	})
}
