package producer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// What docs/operations.md promises of each appendfsync policy when the
// Redis process dies (SIGKILL) but the machine does not: Redis writes the
// AOF before it replies, so every acknowledged send is replayed, whatever
// the policy; the policy only decides what a crash of the machine loses.
func TestAcknowledgedSendsSurviveRedisKill(t *testing.T) {
	for _, fsync := range []string{"always", "everysec", "no"} {
		t.Run(fsync, func(t *testing.T) {
			srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: fsync})
			rdb := redistest.Client(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := newProducer(rdb, "rmq")
			tp := topic.MustNew("durable", topic.FixedTime, 8)
			const senders, each = 16, 50
			var wg sync.WaitGroup
			for g := range senders {
				wg.Go(func() {
					for j := range each {
						_, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("%d-%d", g, j)), time.Now().Add(time.Hour))
						assert.NoError(t, err)
					}
				})
			}
			wg.Wait()
			require.NoError(t, srv.Kill())
			require.NoError(t, srv.Restart(ctx))
			st, err := rmq.NewInspector(rdb).Stats(ctx, tp)
			require.NoError(t, err)
			assert.EqualValues(t, senders*each, st.Store)

			// A restarted Redis has an empty script cache (scripts are not
			// in the AOF): the same producer's next sends, single and
			// batched, load their scripts again without a step from us.
			loaded, err := rdb.ScriptExists(ctx, scripts.Send1.Hash(), scripts.SendBatch.Hash()).Result()
			require.NoError(t, err)
			require.Equal(t, []bool{false, false}, loaded, "the restart kept the script cache")
			_, err = p.SendFixedTime(ctx, tp, []byte("after"), time.Now().Add(time.Hour))
			require.NoError(t, err)
			_, err = p.SendBatch(ctx, tp, []producer.BatchMessage{{Body: []byte("b1"), At: time.Now().Add(time.Hour)}, {Body: []byte("b2"), At: time.Now().Add(time.Hour)}})
			require.NoError(t, err)
			st, err = rmq.NewInspector(rdb).Stats(ctx, tp)
			require.NoError(t, err)
			assert.EqualValues(t, senders*each+3, st.Store)
		})
	}
}
