package rmq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// captureHandler is a slog.Handler that passes each record, with the
// attributes of its logger, to a channel.
type captureHandler struct {
	ch    chan<- slog.Record
	attrs []slog.Attr
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	select {
	case h.ch <- r:
	default: // a full channel drops; the test reads what it needs
	}
	return nil
}

func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return captureHandler{ch: h.ch, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h captureHandler) WithGroup(string) slog.Handler { return h }

// A message dead-lettered by the sweeper (its last attempt's lease ran out)
// is logged at Warn on its own, with topic, id, attempts and last error.
func TestSweeperLogsEachDeadLetterAtWarn(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "sweepdead", topic.FixedTime, 1)
	send(t, e.client().Producer(), tp, "job", "b")

	// A consumer that died holding the message: fetched, lease run out.
	k := e.keys(tp, 0)
	keys, args := scripts.FetchCall{TimeBased: true, N: 1, LeaseSec: 30, Window: 8,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 1}}}.Args()
	vals, err := scripts.Fetch.Run(ctx, e.rdb, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	require.Len(t, r.Msgs, 1)
	score, ok := e.zscore(k.Prepare, "job")
	require.True(t, ok)
	require.NoError(t, e.rdb.ZAddXX(ctx, k.Prepare, redis.Z{Score: pastScore(score), Member: "job"}).Err())

	records := make(chan slog.Record, 256)
	c := e.client(rmq.WithLogger(slog.New(captureHandler{ch: records})))
	require.NoError(t, c.Register(tp, newRecorder(nil), consumer.WithMaxRetries(0), consumer.WithSweepInterval(100*time.Millisecond)))
	e.start(c)

	deadline := time.After(10 * time.Second)
	for {
		select {
		case rec := <-records:
			if rec.Message != "rmq: message moved to the dead queue" {
				continue
			}
			assert.Equal(t, slog.LevelWarn, rec.Level)
			got := map[string]any{}
			rec.Attrs(func(a slog.Attr) bool {
				got[a.Key] = a.Value.Any()
				return true
			})
			assert.Equal(t, "sweepdead", got["topic"])
			assert.Equal(t, "job", got["id"])
			assert.EqualValues(t, 1, got["attempts"])
			assert.Equal(t, "rmq: lease expired", got["last_error"])
			_, dead := e.zscore(k.Dead, "job")
			assert.True(t, dead)
			return
		case <-deadline:
			t.Fatal("no Warn record for the dead-lettered message")
		}
	}
}
