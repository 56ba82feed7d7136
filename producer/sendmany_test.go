package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// SendMany: messages of several topics and types, each with its own
// options, in one script call on a single node; a refused message is not
// written and the others are, each with its own id and error.
func TestSendManyReportsEachMessage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		var (
			p       *producer.Producer
			rdb     redis.UniversalClient
			counter *rmqtest.ScriptCounter // single node only
			prefix  string
		)
		if backend == "cluster" {
			p, rdb, _, prefix = setupHooked(t, backend)
		} else {
			p, rdb, counter, prefix = singleCounted(t)
		}
		ctx := context.Background()
		ft := topic.MustNew("many-ft", topic.FixedTime, 4)
		pr := topic.MustNew("many-pr", topic.Priority, 2)
		at := time.Now().Add(time.Hour)
		msgs := []producer.TopicMessage{
			{Topic: ft, BatchMessage: producer.BatchMessage{Body: []byte("a"), Key: "a", At: at, Options: []producer.SendOption{producer.WithMaxRetries(2)}}},
			{Topic: pr, BatchMessage: producer.BatchMessage{Body: []byte("p"), Key: "p", Priority: 100, Options: []producer.SendOption{producer.WithTTL(time.Minute)}}},
			{Topic: pr, BatchMessage: producer.BatchMessage{Body: []byte("bad"), Key: "bad", Priority: 1}}, // below MinPriority
			{Topic: ft, BatchMessage: producer.BatchMessage{Body: nil, Key: "empty", At: at}},              // empty body
			{Topic: ft, BatchMessage: producer.BatchMessage{Body: []byte("b"), At: at}},                    // body id
		}
		ids, errs := p.SendMany(ctx, msgs)
		require.Len(t, ids, len(msgs))
		require.Len(t, errs, len(msgs))
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		assert.True(t, errors.Is(errs[2], producer.ErrInvalidPriority), "%v", errs[2])
		assert.True(t, errors.Is(errs[3], producer.ErrEmptyBody), "%v", errs[3])
		assert.NoError(t, errs[4])
		assert.Equal(t, []string{"a", "p", "", "", producer.BodyID([]byte("b"))}, ids)
		if counter != nil {
			assert.Equal(t, int64(1), counter.N(), "one script call on a single node")
		}

		env := func(tp topic.Topic, id string) (scripts.Envelope, bool) {
			for s := 0; s < tp.SlotAmount(); s++ {
				v, err := rdb.HGet(ctx, keyspace.KeysFor(prefix, tp, s).Msg, id).Bytes()
				if err == nil {
					e, err := scripts.DecodeEnvelope(v)
					require.NoError(t, err)
					return e, true
				}
			}
			return scripts.Envelope{}, false
		}
		a, ok := env(ft, "a")
		require.True(t, ok)
		assert.Equal(t, "a", string(a.Body))
		assert.Equal(t, 2, a.Options.MaxRetries)
		assert.True(t, a.Options.HasMaxRetries)
		pe, ok := env(pr, "p")
		require.True(t, ok)
		assert.NotZero(t, pe.Options.ExpiresAtMs)
		assert.False(t, pe.Options.HasMaxRetries)
		_, ok = env(pr, "bad")
		assert.False(t, ok, "a refused message is not written")
		_, ok = env(ft, "empty")
		assert.False(t, ok)
		_, ok = env(ft, ids[4])
		assert.True(t, ok)
	})
}
